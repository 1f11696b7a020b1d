package balances

import (
	"bytes"
	"math/big"
	"slices"

	"github.com/moraine-data/moraine/pkg/evm"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
	"github.com/moraine-data/moraine/schemas/record"
)

// Delta is one level-0 row of balances: a holder's net change of one token
// in one block.
type Delta struct {
	Key schema.BalanceKey
	// Amount is the signed change, decimal; never "0" (a change that nets
	// to nothing writes no row).
	Amount string
}

// NFTTransfer is one nft_transfers row.
type NFTTransfer struct {
	Key   schema.NFTKey
	Entry []byte
}

// Rows is what one block adds to the balance tables.
type Rows struct {
	Deltas []Delta
	NFTs   []NFTTransfer
}

// zero is the zero address: the source of mints and the sink of burns, and
// never a holder. ERC-20's _mint and _burn do not credit or debit it
// (balanceOf(0x0) stays 0), and an ERC-721 token "owned" by it does not
// exist. A token that really lets 0x0 receive (old tokens without the
// zero-address check) differs here from its balanceOf; docs/balances.md.
var zero evm.Address

type holding struct {
	holder evm.Address
	pair   schema.BalancePair
}

// FromBlock appends to rows what block b adds to the balance tables: per
// (holder, token, token id), the net change of the block's token transfers
// (evm.Transfers: ERC-20 and ERC-721 Transfer, ERC-1155 TransferSingle and
// TransferBatch), and every ERC-721 and ERC-1155 transfer by token id.
//
// Transfers of failed transactions are skipped: their receipts carry no
// logs, and a log of a reverted call inside a successful transaction was
// never emitted. A self-transfer nets to nothing. Rows come out sorted by
// key, so the same block always gives the same rows in the same order.
func FromBlock(rows *Rows, b *record.Block) {
	var hash [32]byte
	copy(hash[:], b.Hash)
	net := map[holding]*big.Int{}
	var order []holding
	add := func(h holding, v *big.Int, neg bool) {
		sum, ok := net[h]
		if !ok {
			sum = new(big.Int)
			net[h] = sum
			order = append(order, h)
		}
		if neg {
			sum.Sub(sum, v)
		} else {
			sum.Add(sum, v)
		}
	}
	for _, tx := range b.Transactions {
		if tx.Status == 0 {
			continue
		}
		for _, l := range tx.Logs {
			token, ok := evm.AddressFrom(l.Address)
			if !ok {
				continue
			}
			var sub uint32
			evm.Transfers(l.Topics, l.Data, func(t evm.Transfer) {
				p := schema.BalancePair{Kind: uint8(t.Kind), Token: token}
				copy(p.TokenID[:], t.TokenID)
				v := new(big.Int).SetBytes(t.Value)
				if t.Kind != evm.ERC20 {
					rows.NFTs = append(rows.NFTs, NFTTransfer{
						Key: schema.NewNFTKey(b.ChainId, token, p.TokenID, schema.NFTPosition{
							Kind: p.Kind, Block: b.Number, LogIndex: l.LogIndex, Sub: sub, BlockHash: hash}),
						Entry: schema.NFTEntry(nil, t.From, t.To, v.String()),
					})
					sub++
				}
				if v.Sign() == 0 {
					return
				}
				if t.From != zero {
					add(holding{t.From, p}, v, true)
				}
				if t.To != zero {
					add(holding{t.To, p}, v, false)
				}
			})
		}
	}
	first := len(rows.Deltas)
	for _, h := range order {
		if v := net[h]; v.Sign() != 0 {
			rows.Deltas = append(rows.Deltas, Delta{Key: schema.DeltaKey(b.ChainId, h.holder, b.Number, h.pair, hash), Amount: v.String()})
		}
	}
	slices.SortFunc(rows.Deltas[first:], func(a, b Delta) int { return bytes.Compare(a.Key[:], b.Key[:]) })
}
