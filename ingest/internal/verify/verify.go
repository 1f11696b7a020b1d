// Package verify checks that a block is complete before ingest produces it:
// it recomputes what the block's header commits to, with go-ethereum's own
// derivation, and compares.
//
//   - receiptsRoot: the trie root of the receipts as consensus encodes them
//     (type, status, cumulative gas used, logs bloom, logs), rebuilt from the
//     converted record, so that a receipt or a log missing from the node's
//     answer (or lost on the way to the record) fails it (types.DeriveSha over
//     types.Receipts).
//   - logsBloom: the header's bloom against the bloom of every log of the
//     record (types.CreateBloom).
//   - transactionsRoot: the trie root of the signed transactions of the
//     node's answer (types.Transaction from its JSON, signedTx;
//     types.DeriveSha). It
//     needs the real signatures: chains whose nodes return others relax it.
//
// One trace per transaction (chains.CheckTraces) is checked where the
// traces are matched to transactions (package convert, Raw.RequireTraces).
//
// Which checks run is per chain (chains.Chain.SkipChecks). A receipts root
// needs post-Byzantium receipts (status, not an intermediate state root):
// chains indexed from before that fork relax it.
package verify

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/trie"

	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/jsonx"
	"github.com/moraine-data/moraine/schemas/record"
)

// Checks says which checks Block makes.
type Checks struct {
	ReceiptsRoot, LogsBloom, TransactionsRoot bool
}

// ForChain is the checks of a chain: all but those its SkipChecks names.
func ForChain(ch chains.Chain) Checks {
	return Checks{
		ReceiptsRoot:     ch.Checked(chains.CheckReceiptsRoot),
		LogsBloom:        ch.Checked(chains.CheckLogsBloom),
		TransactionsRoot: ch.Checked(chains.CheckTransactionsRoot),
	}
}

// Failure is a block that does not match its header.
type Failure struct {
	// Check is the check that failed (chains.CheckReceiptsRoot, ...): the
	// label of the failures metric.
	Check string
	// Number and Hash are the block's.
	Number uint64
	Hash   []byte
	// Want is what the header says, Got what the answers give.
	Want, Got string
}

func (f *Failure) Error() string {
	return fmt.Sprintf("block %d (0x%x) fails %s: header has %s, the answers give %s", f.Number, f.Hash, f.Check, f.Want, f.Got)
}

// Block checks b, converted from rawBlock (eth_getBlockByNumber(n, true)),
// against its header: nil, a *Failure, or an error reading rawBlock.
func Block(c Checks, b *record.Block, rawBlock json.RawMessage) error {
	fail := func(check, want, got string) error {
		return &Failure{Check: check, Number: b.Number, Hash: b.Hash, Want: want, Got: got}
	}
	if c.ReceiptsRoot || c.LogsBloom {
		receipts := make(types.Receipts, len(b.Transactions))
		var bloom types.Bloom
		for i, tx := range b.Transactions {
			r := &types.Receipt{Type: uint8(tx.Type), Status: uint64(tx.Status), CumulativeGasUsed: tx.CumulativeGasUsed,
				Logs: make([]*types.Log, len(tx.Logs))}
			for j, l := range tx.Logs {
				lg := &types.Log{Address: common.BytesToAddress(l.Address), Data: l.Data, Topics: make([]common.Hash, len(l.Topics))}
				for k, t := range l.Topics {
					lg.Topics[k] = common.BytesToHash(t)
				}
				r.Logs[j] = lg
			}
			r.Bloom = types.CreateBloom(r)
			for k := range bloom {
				bloom[k] |= r.Bloom[k]
			}
			receipts[i] = r
		}
		if c.ReceiptsRoot {
			if got := types.DeriveSha(receipts, trie.NewStackTrie(nil)); !bytes.Equal(got[:], b.ReceiptsRoot) {
				return fail(chains.CheckReceiptsRoot, fmt.Sprintf("0x%x", b.ReceiptsRoot), got.Hex())
			}
		}
		if c.LogsBloom {
			header, err := field(rawBlock, "logsBloom")
			if err != nil {
				return err
			}
			want, err := hexBytes(header)
			if err != nil || len(want) != types.BloomByteLength {
				return fmt.Errorf("block %d: logsBloom %.20q is not a bloom", b.Number, header)
			}
			if !bytes.Equal(want, bloom[:]) {
				return fail(chains.CheckLogsBloom, summarise(want), summarise(bloom[:]))
			}
		}
	}
	if c.TransactionsRoot {
		got, err := transactionsRoot(rawBlock)
		if err != nil {
			return fmt.Errorf("block %d: %w", b.Number, err)
		}
		if !bytes.Equal(got[:], b.TransactionsRoot) {
			return fail(chains.CheckTransactionsRoot, fmt.Sprintf("0x%x", b.TransactionsRoot), got.Hex())
		}
	}
	return nil
}

// transactionsRoot derives the root of the block's signed transactions.
func transactionsRoot(rawBlock json.RawMessage) (common.Hash, error) {
	raw, err := field(rawBlock, "transactions")
	if err != nil {
		return common.Hash{}, err
	}
	var txs types.Transactions
	r := jsonx.NewReader(raw)
	err = r.Array(func() error {
		elem, err := r.Raw()
		if err != nil {
			return err
		}
		tx, err := signedTx(elem)
		if err != nil {
			return fmt.Errorf("transaction %d: %w", len(txs), err)
		}
		txs = append(txs, tx)
		return nil
	})
	if err != nil {
		return common.Hash{}, fmt.Errorf("transactions: %w", err)
	}
	return types.DeriveSha(txs, trie.NewStackTrie(nil)), nil
}

// field returns the raw value of a top-level key of an object.
func field(obj json.RawMessage, key string) ([]byte, error) {
	var out []byte
	r := jsonx.NewReader(obj)
	err := r.Object(func(k []byte) error {
		if string(k) != key {
			return r.Skip()
		}
		var err error
		out, err = r.Raw()
		return err
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		return nil, fmt.Errorf("no %s", key)
	}
	return out, nil
}

func hexBytes(quoted []byte) ([]byte, error) {
	var s string
	if err := json.Unmarshal(quoted, &s); err != nil {
		return nil, err
	}
	return common.FromHex(s), nil
}

// summarise names a bloom by its set bits (a bloom's hex is 512 characters).
func summarise(b []byte) string { return fmt.Sprintf("a bloom with %d bits set", popcount(b)) }

func popcount(b []byte) int {
	n := 0
	for _, c := range b {
		for ; c != 0; c &= c - 1 {
			n++
		}
	}
	return n
}
