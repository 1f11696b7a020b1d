package balances

import (
	"context"
	"errors"
	"log/slog"
	"math/big"
	"time"

	"github.com/moraine-data/moraine/pkg/evm"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// Node reads token balances from a chain's node.
type Node interface {
	// BalancesAt returns holder's balance of each pair at block: ERC-20
	// balanceOf(holder), ERC-1155 balanceOf(holder, id), ERC-721 1 when
	// ownerOf(id) is holder and 0 otherwise (also when ownerOf reverts: the
	// token did not exist). A nil entry is a pair the node could not say
	// (the call reverted where no revert is a balance); err is a failure
	// of the node itself (down, or without the block's state).
	BalancesAt(ctx context.Context, chainID uint64, holder evm.Address, block uint64, pairs []schema.BalancePair) ([]*big.Int, error)
}

// Opener finds opening balances: on a chain whose balances start after
// its first block (Progress.Complete is false), a holder's balance of a
// pair is its balance at the block before the first (the opening) plus the
// deltas since. Found once, an opening is kept in balances as a level-3
// row.
//
// An ERC-721 opening needs no node: the token's first indexed transfer
// names its owner before it (its sender), and a token that has none since
// the first block is not in any list. Other openings are the node's
// balanceOf / balanceOfBatch at the opening block, which needs a node that
// keeps that block's state (an archive node, for a start far back).
//
// Openings are found when a read first needs them, not by the sink: a
// backfill would otherwise wait on one node call per new holder and token,
// and most of them are never asked for. A pair the node cannot say stays
// unopened (Holding.Partial) and is asked again by a later read.
type Opener struct {
	db      DB
	nfts    *NFTs
	node    Node // nil: no node reads
	timeout time.Duration
	logger  *slog.Logger
}

// NewOpener returns an opener writing to db and reading ERC-721 openings
// from nfts; every Open gives node (nil: none) at most timeout.
func NewOpener(db DB, nfts *NFTs, node Node, timeout time.Duration, logger *slog.Logger) *Opener {
	return &Opener{db: db, nfts: nfts, node: node, timeout: timeout, logger: logger}
}

// openBatch is how many pairs one node request asks about.
const openBatch = 100

// Open reads holder's balances of pairs at block from the node, writes
// those it got as opening rows and returns them. Pairs the node could not
// say are absent; a node failure leaves every pair from then on absent and
// is logged, not returned: the read goes on with partial balances. Only a
// failure to write the rows is an error.
func (o *Opener) Open(ctx context.Context, chainID uint64, holder evm.Address, block uint64, pairs []schema.BalancePair) (map[schema.BalancePair]*big.Int, error) {
	out := map[schema.BalancePair]*big.Int{}
	// ERC-721 from the first transfers, by token.
	nfts := map[evm.Address][][32]byte{}
	var rest []schema.BalancePair
	for _, p := range pairs {
		if evm.Kind(p.Kind) == evm.ERC721 && o.nfts != nil {
			nfts[p.Token] = append(nfts[p.Token], p.TokenID)
		} else {
			rest = append(rest, p)
		}
	}
	for token, ids := range nfts {
		senders, err := o.nfts.FirstSenders(ctx, chainID, token, ids)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			if s, ok := senders[id]; ok {
				v := new(big.Int)
				if s == holder {
					v.SetInt64(1)
				}
				out[schema.BalancePair{Kind: uint8(evm.ERC721), Token: token, TokenID: id}] = v
			}
		}
	}
	if o.node == nil {
		rest = nil
	}
	nctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	for lo := 0; lo < len(rest); lo += openBatch {
		part := rest[lo:min(lo+openBatch, len(rest))]
		got, err := o.node.BalancesAt(nctx, chainID, holder, block, part)
		if err != nil {
			if ctx.Err() == nil {
				o.logger.Warn("balances: opening balances not read from the node; answering partial balances",
					"chain_id", chainID, "block", block, "pairs", len(rest)-lo, "err", err)
			}
			break
		}
		for i, v := range got {
			if v != nil {
				out[part[i]] = v
			}
		}
	}
	if len(out) == 0 {
		return out, nil
	}
	b, err := o.db.Insert(ctx, "INSERT INTO balances ("+BalanceColumns+")")
	if err != nil {
		return nil, err
	}
	for pair, v := range out {
		k := schema.OpeningKey(chainID, holder, block, pair)
		// Version 0: the same opening is always the same amount.
		if err := b.Append(string(k[:]), v.String(), uint64(0)); err != nil {
			_ = b.Abort()
			return nil, errors.Join(errors.New("balances: append opening"), err)
		}
	}
	if err := b.Send(); err != nil {
		return nil, classify(err, "insert openings")
	}
	return out, nil
}

// BalanceColumns are the columns of a balances INSERT.
const BalanceColumns = "bal_key, amount, version"
