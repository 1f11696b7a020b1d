package sink

import (
	"context"
	"testing"
	"time"

	"github.com/moraine-data/moraine/pkg/testenv"
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
		b := NewBatch(events, true)
		if err := w.WriteChildren(ctx, b); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteBlocks(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	want := len(NewBatch(events, true).index)
	var rows, hashes uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM address_index FINAL").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT count() FROM transaction_hashes FINAL WHERE chain_id = 1 AND hash = ? AND block_number = 100 AND tx_index = 3",
		string(word(0xfeed))).Scan(&hashes); err != nil {
		t.Fatal(err)
	}
	if rows != uint64(want) || hashes != 1 {
		t.Fatalf("%d index rows (want %d), %d hash rows (want 1)", rows, want, hashes)
	}
	var (
		roles, status uint8
		selector, to  string
		callType, val string
	)
	if err := conn.QueryRow(ctx, "SELECT roles, status, selector, to_address FROM address_index FINAL WHERE address = ? AND list = 1",
		string(alice)).Scan(&roles, &status, &selector, &to); err != nil {
		t.Fatal(err)
	}
	if roles != 5 || status != 1 || selector != "\x01\x02\x03\x04" || to != string(router) {
		t.Fatalf("alice's transaction row: roles %d status %d selector %x to %x", roles, status, selector, to)
	}
	if err := conn.QueryRow(ctx, "SELECT call_type, value, status FROM address_index FINAL WHERE address = ? AND list = 6 AND position = 8",
		string(orphanKid)).Scan(&callType, &val, &status); err != nil {
		t.Fatal(err)
	}
	if callType != "CREATE" || val != "0" || status != 0 {
		t.Fatalf("reverted creation: %s %s status %d", callType, val, status)
	}
}
