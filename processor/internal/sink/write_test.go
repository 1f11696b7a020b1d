package sink

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/moraine-data/moraine/pkg/testenv"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

// The history tables go in with the block tables, on the real server, and
// a redelivered batch (same offsets) changes nothing.
func TestWriteIndexIntegration(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	events := []Event{{Offset: 5, Event: &record.ChainEvent{Event: &record.ChainEvent_Block{Block: &record.Block{
		ChainId: 1, Number: 100, Hash: word(0xb10c), Timestamp: 1_700_000_000, BaseFee: "25000000000", Transactions: []*record.Transaction{indexedTx()}}}}}}
	w := NewWriter(conn, time.Minute)
	for range 2 {
		b, err := NewBatch(events, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteChildren(ctx, b); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteBlocks(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	b, err := NewBatch(events, true)
	if err != nil {
		t.Fatal(err)
	}
	want := len(b.index)
	var rows, hashes uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM address_lists FINAL").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	var entry string
	from, to := schema.TxKeyRange(1, hash32(word(0xfeed)))
	if err := conn.QueryRow(ctx, "SELECT count(), any(entry) FROM transactions_by_hash FINAL WHERE tx_key >= unhex(?) AND tx_key <= unhex(?)",
		hex.EncodeToString(from[:]), hex.EncodeToString(to[:])).Scan(&hashes, &entry); err != nil {
		t.Fatal(err)
	}
	block, index, lookup, err := schema.ParseTxEntry([]byte(entry))
	if err != nil || block != 100 || index != 3 {
		t.Fatalf("the transaction's entry: block %d, index %d, %v", block, index, err)
	}
	if rows != uint64(want) || hashes != 1 || string(lookup) != string(b.txs[0].lookup) {
		t.Fatalf("%d index rows (want %d), %d lookup rows (want 1), detail kept: %v", rows, want, hashes, string(lookup) == string(b.txs[0].lookup))
	}
	var d0 record.TxDetail
	if err := d0.UnmarshalVT(lookup); err != nil || d0.GetBlockTimestamp() != 1_700_000_000 || d0.BlockBaseFee != "25000000000" {
		t.Fatalf("the lookup detail carries its block's fields: %v, %v", &d0, err)
	}
	var (
		roles uint8
		key   string
	)
	if err := conn.QueryRow(ctx, "SELECT list_key, roles, entry FROM address_lists FINAL WHERE substring(list_key, 9, 21) = unhex(?)",
		hex.EncodeToString(alice)+"01").Scan(&key, &roles, &entry); err != nil {
		t.Fatal(err)
	}
	k, err := schema.ParseListKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if p := k.Position(); p.Block != 100 || p.TxIndex != 3 || entry[:32] != string(word(0xfeed)) {
		t.Fatalf("alice's transaction row at %+v, transaction %x", p, entry[:32])
	}
	var d record.TxDetail
	if err := d.UnmarshalVT([]byte(entry[32:])); err != nil || roles != 5 || d.Status != 1 || string(d.Input) != "\x01\x02\x03\x04" ||
		string(d.To) != string(router) || len(d.Transfers) != 3 {
		t.Fatalf("alice's transaction row: roles %d, %v, %v", roles, &d, err)
	}
	// The block's listing: one row however often the batch was written.
	var lists uint64
	if err := conn.QueryRow(ctx, "SELECT count(), any(entry) FROM block_transactions FINAL WHERE chain_id = 1 AND block_number = 100").
		Scan(&lists, &entry); err != nil {
		t.Fatal(err)
	}
	l, err := codec.DecodeBlockTxList([]byte(entry))
	if err != nil || lists != 1 || len(l.Txs) != 1 || string(l.Txs[0].Hash) != string(word(0xfeed)) || l.Txs[0].Index != 3 {
		t.Fatalf("%d block_transactions rows, %v, %v", lists, l, err)
	}
}

// The balance tables go in with the block tables: one delta per holder and
// token the block changes, one NFT row per ERC-721/1155 transfer, the
// chain's first block; a redelivered batch (same offsets) changes nothing,
// and a later batch does not move the first block.
func TestWriteBalancesIntegration(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	block := func(offset int64, number uint64) Event {
		return Event{Offset: offset, Event: &record.ChainEvent{Event: &record.ChainEvent_Block{Block: &record.Block{
			ChainId: 1, Number: number, Hash: word(number), Transactions: []*record.Transaction{indexedTx()}}}}}
	}
	w := NewWriter(conn, time.Minute)
	write := func(events ...Event) *Batch {
		b, err := NewBatchOf(events, Tables{Balances: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteChildren(ctx, b); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteBlocks(ctx, b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := write(block(5, 100))
	write(block(5, 100))
	write(block(6, 101))
	// indexedTx: alice -1000 usd, bob +1000 usd; bob -1 nft#7, carol +1;
	// carol -5 items#1 and -6 items#2, alice +5 and +6: 8 deltas, 3 NFT rows.
	if len(b.balances.Deltas) != 8 || len(b.balances.NFTs) != 3 || b.Len() != 1+1+1+1+4+9+2*8+3+1 {
		t.Fatalf("batch of %d deltas, %d NFT rows, %d rows in all", len(b.balances.Deltas), len(b.balances.NFTs), b.Len())
	}
	var deltas, pairs, nfts, first uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM balances FINAL").Scan(&deltas); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT count() FROM balance_pairs FINAL").Scan(&pairs); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT count() FROM nft_transfers FINAL").Scan(&nfts); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT argMax(value, version) FROM balance_progress WHERE chain_id = 1 AND kind = 0").Scan(&first); err != nil {
		t.Fatal(err)
	}
	if deltas != 16 || pairs != 8 || nfts != 6 || first != 100 {
		t.Fatalf("%d deltas (want 16), %d pairs (want 8), %d NFT rows (want 6), first block %d (want 100)", deltas, pairs, nfts, first)
	}
}

// Without --processor.internal-input-output the call frames go in whole but
// for their input and output, which are empty; with it (the default) they
// go in as recorded.
func TestWriteInternalInputOutputIntegration(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	w := NewWriter(conn, time.Minute)
	write := func(chain uint64, tables Tables) {
		tx := indexedTx()
		for i, it := range tx.InternalTransactions {
			it.Input, it.Output = []byte{0xca, 0x11, byte(i)}, []byte{0x0e, byte(i)}
			it.Gas, it.GasUsed = 100+uint64(i), 10+uint64(i)
		}
		b, err := NewBatchOf([]Event{{Offset: int64(chain), Event: &record.ChainEvent{Event: &record.ChainEvent_Block{Block: &record.Block{
			ChainId: chain, Number: 100, Hash: word(0xb10c), Transactions: []*record.Transaction{tx}}}}}}, tables)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteChildren(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	write(1, Tables{})
	write(2, Tables{NoInternalInputOutput: true})
	rows, err := conn.Query(ctx, `SELECT chain_id, trace_position, type, hex(from_address), hex(to_address), value, gas, gas_used,
 hex(input), hex(output) FROM internal_transactions ORDER BY chain_id, trace_position`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	frames := len(indexedTx().InternalTransactions)
	got := map[uint64][]string{}
	for rows.Next() {
		var (
			chain, gas, gasUsed                 uint64
			pos                                 uint32
			typ, from, to, value, input, output string
		)
		if err := rows.Scan(&chain, &pos, &typ, &from, &to, &value, &gas, &gasUsed, &input, &output); err != nil {
			t.Fatal(err)
		}
		got[chain] = append(got[chain], fmt.Sprintf("%d %s %s>%s %s %d/%d in %q out %q", pos, typ, from, to, value, gas, gasUsed, input, output))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got[1]) != frames || len(got[2]) != frames {
		t.Fatalf("%d and %d frames written, want %d each", len(got[1]), len(got[2]), frames)
	}
	for i := range frames {
		kept, dropped := got[1][i], got[2][i]
		wantIn, wantOut := fmt.Sprintf("in %q out %q", fmt.Sprintf("CA11%02X", i), fmt.Sprintf("0E%02X", i)), `in "" out ""`
		if !strings.HasSuffix(kept, wantIn) || !strings.HasSuffix(dropped, wantOut) ||
			strings.TrimSuffix(kept, wantIn) != strings.TrimSuffix(dropped, wantOut) {
			t.Errorf("frame %d: kept %q, without input and output %q", i, kept, dropped)
		}
	}
}
