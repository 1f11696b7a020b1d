package replay

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/tokenmeta"
	"github.com/moraine-data/moraine/processor/internal/ledger"
	"github.com/moraine-data/moraine/processor/internal/match"
	"github.com/moraine-data/moraine/processor/internal/payload"
	"github.com/moraine-data/moraine/processor/internal/watchlist"
	"github.com/moraine-data/moraine/schemas/record"
)

// chunk is one transaction's worth of a replay: the messages of blocks
// from..to.
type chunk struct {
	from, to uint64
	// retransmitted are messages the stream carried (ledger), with their
	// sequence numbers, in sequence order; fresh are messages it never
	// carried, to number, in block and transaction order.
	retransmitted, fresh []*record.Activity
	// missing counts ledger messages whose transaction the indexed tables
	// do not hold (not repeated: logged).
	missing int
}

// webhookNow is what a replay matches with: the webhook's settings and
// addresses as they are now (the matcher's rules, package match).
type webhookNow struct {
	settings *watchlist.Webhook
	table    *watchlist.Table
	addrs    []evm.Address
}

// tokenResolver is what derive needs of tokenmeta.Resolver.
type tokenResolver interface {
	Resolve(ctx context.Context, chain uint64, addrs []evm.Address) map[evm.Address]*tokenmeta.Token
}

// deriveInput is what one chunk is built from.
type deriveInput struct {
	job     jobSpec
	from    uint64
	maxTo   uint64
	maxMsgs int
	hook    webhookNow
	// entries are the ledger's messages of from..maxTo, in sequence order.
	entries []ledger.Entry
	now     int64
}

// jobSpec is what derive needs of a job.
type jobSpec struct {
	id, webhookID, accountID string
	chain                    uint64
}

// derive builds the chunk starting at in.from: every block up to in.maxTo
// while the messages stay within in.maxMsgs (at least one block).
//
// The messages are the webhook stream's over those blocks, repeated (every
// ledger message, activity or retraction, with its number and its payload
// rebuilt with the settings it was built with), then the activity the
// webhook's addresses and filters of now match in the canonical blocks
// that the stream never carried.
func derive(ctx context.Context, src *source, tokens tokenResolver, native *chains.Token, in deriveInput) (chunk, error) {
	chain := in.job.chain
	canon, err := src.canonical(ctx, chain, in.from, in.maxTo)
	if err != nil {
		return chunk{}, err
	}
	cands, err := src.candidates(ctx, chain, in.from, in.maxTo, in.hook.addrs, in.hook.settings.IncludeInternalTxs)
	if err != nil {
		return chunk{}, err
	}
	// Keep the candidates of canonical blocks; cut the range where the
	// messages would exceed the bound (whole blocks only).
	perBlock := map[uint64]int{}
	for _, c := range cands {
		if h, ok := canon[c.block]; ok && bytes.Equal(h.hash, c.key.block[:]) {
			perBlock[c.block]++
		}
	}
	for _, e := range in.entries {
		perBlock[e.BlockNumber]++
	}
	to := in.maxTo
	blocks := make([]uint64, 0, len(perBlock))
	for n := range perBlock {
		blocks = append(blocks, n)
	}
	slices.Sort(blocks)
	total := 0
	for _, n := range blocks {
		if total > 0 && total+perBlock[n] > in.maxMsgs {
			to = n - 1
			break
		}
		total += perBlock[n]
	}
	out := chunk{from: in.from, to: to}

	wanted := map[txKey]bool{}
	for _, c := range cands {
		if h, ok := canon[c.block]; ok && c.block <= to && bytes.Equal(h.hash, c.key.block[:]) {
			wanted[c.key] = true
		}
	}
	var entries []ledger.Entry
	for _, e := range in.entries {
		if e.BlockNumber > to {
			continue
		}
		entries = append(entries, e)
		if e.Kind == record.ActivityKind_ACTIVITY_KIND_ACTIVITY {
			wanted[keyOf(e.BlockHash, e.TxHash)] = true
		}
	}
	rows, err := src.transactions(ctx, chain, in.from, to, wanted)
	if err != nil {
		return chunk{}, err
	}

	// The blocks, each holding the transactions read of it.
	blocksByHash := map[[32]byte]*record.Block{}
	blockOf := func(row *txRow, receiptsRoot []byte) *record.Block {
		var k [32]byte
		copy(k[:], row.blockHash)
		b := blocksByHash[k]
		if b == nil {
			b = &record.Block{ChainId: chain, Number: row.block, Hash: row.blockHash, Timestamp: row.timestamp, ReceiptsRoot: receiptsRoot}
			if h, ok := canon[row.block]; ok && bytes.Equal(h.hash, row.blockHash) {
				b.Timestamp, b.ReceiptsRoot = h.timestamp, h.receiptsRoot
			}
			blocksByHash[k] = b
		}
		return b
	}
	for _, e := range entries {
		if row := rows[keyOf(e.BlockHash, e.TxHash)]; row != nil && e.Kind == record.ActivityKind_ACTIVITY_KIND_ACTIVITY {
			blockOf(row, e.ReceiptsRoot)
		}
	}
	for k := range wanted {
		if row := rows[k]; row != nil {
			blockOf(row, nil)
		}
	}
	txOf := map[txKey]*record.Transaction{}
	for k, row := range rows {
		var bk [32]byte
		copy(bk[:], row.blockHash)
		if b := blocksByHash[bk]; b != nil {
			b.Transactions = append(b.Transactions, row.tx)
			txOf[k] = row.tx
		}
	}
	for _, b := range blocksByHash {
		slices.SortFunc(b.Transactions, func(x, y *record.Transaction) int { return cmp.Compare(x.GetIndex(), y.GetIndex()) })
	}

	// What the stream carried, by (block, messageId): a match the ledger
	// has is repeated from the ledger, not numbered again.
	carried := map[txKey]bool{}
	for _, e := range entries {
		if e.Kind == record.ActivityKind_ACTIVITY_KIND_ACTIVITY {
			carried[keyOf(e.BlockHash, []byte(e.MessageID))] = true
		}
	}
	type fresh struct {
		b  *record.Block
		tx *record.Transaction
	}
	var news []fresh
	m := match.New(in.hook.table)
	var ms []match.Match
	for _, h := range sortedCanonical(canon, in.from, to) {
		var k [32]byte
		copy(k[:], h.hash)
		b := blocksByHash[k]
		if b == nil {
			continue
		}
		ms = m.Block(b, ms[:0])
		for _, x := range ms {
			tx := b.GetTransactions()[x.Tx]
			id := payload.MessageID(in.job.webhookID, chain, tx.GetHash())
			if !carried[keyOf(b.GetHash(), []byte(id))] {
				news = append(news, fresh{b, tx})
			}
		}
	}

	// Token metadata of every transfer the payloads list.
	var tokenAddrs []evm.Address
	for _, e := range entries {
		if tx := txOf[keyOf(e.BlockHash, e.TxHash)]; tx != nil && e.Kind == record.ActivityKind_ACTIVITY_KIND_ACTIVITY {
			tokenAddrs = payload.TokenAddresses(tx, tokenAddrs)
		}
	}
	for _, f := range news {
		tokenAddrs = payload.TokenAddresses(f.tx, tokenAddrs)
	}
	var toks map[evm.Address]*tokenmeta.Token
	if len(tokenAddrs) > 0 {
		toks = tokens.Resolve(ctx, chain, tokenAddrs)
	}

	msg := func(b *record.Block, tx *record.Transaction, w *watchlist.Webhook) (*record.Activity, error) {
		body, id, err := payload.Build(payload.Input{Webhook: w, Block: b, Tx: tx, Native: native, Tokens: toks})
		if err != nil {
			return nil, err
		}
		return &record.Activity{
			WebhookId: in.job.webhookID, MessageId: id, AccountId: in.job.accountID, ChainId: chain,
			BlockNumber: b.GetNumber(), BlockHash: b.GetHash(), TxHash: tx.GetHash(), Payload: body, MatchedAtUnixMs: in.now,
			ReplayId: in.job.id, IncludeLogs: w.IncludeLogs, IncludeInternalTxs: w.IncludeInternalTxs, ReceiptsRoot: b.GetReceiptsRoot(),
		}, nil
	}
	for _, e := range entries {
		var a *record.Activity
		switch e.Kind {
		case record.ActivityKind_ACTIVITY_KIND_RETRACTION:
			body, id, err := payload.Retraction(payload.Retracted{WebhookID: e.WebhookID, MessageID: e.RetractedMessageID,
				ChainID: chain, BlockNumber: e.BlockNumber, BlockHash: e.BlockHash, TxHash: e.TxHash})
			if err != nil {
				return chunk{}, err
			}
			if id != e.MessageID {
				return chunk{}, fmt.Errorf("replay: the retraction of %s rebuilt as %s, the ledger has %s", e.RetractedMessageID, id, e.MessageID)
			}
			a = &record.Activity{
				WebhookId: e.WebhookID, MessageId: id, AccountId: in.job.accountID, ChainId: chain, BlockNumber: e.BlockNumber,
				BlockHash: e.BlockHash, TxHash: e.TxHash, Payload: body, MatchedAtUnixMs: in.now, ReplayId: in.job.id,
				Kind: record.ActivityKind_ACTIVITY_KIND_RETRACTION, RetractedMessageId: e.RetractedMessageID,
			}
		default:
			row := rows[keyOf(e.BlockHash, e.TxHash)]
			if row == nil {
				out.missing++
				continue
			}
			var bk [32]byte
			copy(bk[:], row.blockHash)
			// The settings the message was built with, not today's.
			w := &watchlist.Webhook{ID: e.WebhookID, AccountID: in.job.accountID, ChainID: chain,
				IncludeLogs: e.IncludeLogs, IncludeInternalTxs: e.IncludeInternalTxs}
			if a, err = msg(blocksByHash[bk], row.tx, w); err != nil {
				return chunk{}, err
			}
			if a.GetMessageId() != e.MessageID {
				return chunk{}, fmt.Errorf("replay: transaction %x rebuilt with messageId %s, the ledger has %s", e.TxHash, a.GetMessageId(), e.MessageID)
			}
		}
		a.Sequence, a.Retransmission = e.Sequence, true
		out.retransmitted = append(out.retransmitted, a)
	}
	for _, f := range news {
		a, err := msg(f.b, f.tx, in.hook.settings)
		if err != nil {
			return chunk{}, err
		}
		out.fresh = append(out.fresh, a)
	}
	return out, nil
}

// sortedCanonical is canon's blocks of from..to in number order.
func sortedCanonical(canon map[uint64]header, from, to uint64) []header {
	out := make([]header, 0, len(canon))
	for n, h := range canon {
		if n >= from && n <= to {
			out = append(out, h)
		}
	}
	slices.SortFunc(out, func(x, y header) int { return cmp.Compare(x.number, y.number) })
	return out
}
