package sink

import (
	"context"
	"encoding/hex"
	"testing"
	"time"

	"github.com/moraine-data/moraine/pkg/testenv"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
	"github.com/moraine-data/moraine/schemas/record"
)

// The history tables go in with the block tables, on the real server, and
// a redelivered batch (same offsets) changes nothing.
func TestWriteIndexIntegration(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	events := []Event{{Offset: 5, Event: &record.ChainEvent{Event: &record.ChainEvent_Block{Block: &record.Block{
		ChainId: 1, Number: 100, Hash: word(0xb10c), Transactions: []*record.Transaction{indexedTx()}}}}}}
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
	var lookup string
	if err := conn.QueryRow(ctx, "SELECT count(), any(detail) FROM transaction_lookup FINAL WHERE chain_id = 1 AND hash = unhex(?) AND block_number = 100 AND tx_index = 3",
		hex.EncodeToString(word(0xfeed))).Scan(&hashes, &lookup); err != nil {
		t.Fatal(err)
	}
	if rows != uint64(want) || hashes != 1 || lookup != string(b.txs[0].lookup) {
		t.Fatalf("%d index rows (want %d), %d lookup rows (want 1), detail kept: %v", rows, want, hashes, lookup == string(b.txs[0].lookup))
	}
	var (
		roles      uint8
		key, entry string
	)
	if err := conn.QueryRow(ctx, "SELECT list_key, roles, entry FROM address_lists FINAL WHERE substring(list_key, 9, 21) = unhex(?)",
		hex.EncodeToString(alice)+"01").Scan(&key, &roles, &entry); err != nil {
		t.Fatal(err)
	}
	k, err := schema.ParseListKey([]byte(key))
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
}
