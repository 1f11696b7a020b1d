package balances

import (
	"context"
	"math/big"

	"github.com/moraine-data/moraine/pkg/evm"
)

// Service is what the API's balance and NFT routes read: holdings at a
// block (Reader), native balances (Native) and NFTs (NFTs).
type Service struct {
	Reader *Reader
	Native *Native
	NFTs   *NFTs
}

// Holdings answers q (Reader.At).
func (s Service) Holdings(ctx context.Context, q Query) (Result, error) { return s.Reader.At(ctx, q) }

// Progress is the chain's (Reader.Progress).
func (s Service) Progress(ctx context.Context, chainID uint64) (Progress, error) {
	return s.Reader.Progress(ctx, chainID)
}

// NativeBalance is addr's native balance at block (Native.At).
func (s Service) NativeBalance(ctx context.Context, chainID uint64, addr evm.Address, block uint64, settled bool) (*big.Int, error) {
	return s.Native.At(ctx, chainID, addr, block, settled)
}

// NFT is one NFT (NFTs.Token).
func (s Service) NFT(ctx context.Context, chainID uint64, token evm.Address, id [32]byte) (NFT, bool, error) {
	return s.NFTs.Token(ctx, chainID, token, id)
}

// CollectionTokens is a page of a collection's ids (NFTs.Tokens).
func (s Service) CollectionTokens(ctx context.Context, chainID uint64, token evm.Address, after *[32]byte, limit int) ([]NFT, bool, error) {
	return s.NFTs.Tokens(ctx, chainID, token, after, limit)
}
