package watchlist

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

// BenchAddress is the i-th synthetic watched address (shared with the
// match benchmarks through Build1M).
func BenchAddress(i int) evm.Address {
	var a evm.Address
	binary.BigEndian.PutUint64(a[4:12], uint64(i)*0x9E3779B97F4A7C15)
	binary.BigEndian.PutUint64(a[12:], uint64(i))
	return a
}

// benchRecords encodes n address records spread over n/1000 webhooks, as
// the query service writes them.
func benchRecords(b *testing.B, n int, chain uint64) (keys, values [][]byte) {
	b.Helper()
	for h := 0; h < (n+999)/1000; h++ {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", h)
		v, err := codec.EncodeWatchEntry(&record.WatchEntry{Version: 1, Entry: &record.WatchEntry_Webhook{Webhook: &record.WatchedWebhook{
			WebhookId: id, ChainId: chain, Status: record.WebhookStatus_WEBHOOK_STATUS_ACTIVE, EventType: "address_activity",
		}}})
		if err != nil {
			b.Fatal(err)
		}
		keys, values = append(keys, []byte(id)), append(values, v)
	}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i/1000)
		a := BenchAddress(i)
		v, err := codec.EncodeWatchEntry(&record.WatchEntry{Version: uint64(i), Entry: &record.WatchEntry_Address{Address: &record.WatchedAddress{
			WebhookId: id, ChainId: chain, Address: a[:],
		}}})
		if err != nil {
			b.Fatal(err)
		}
		keys, values = append(keys, []byte(codec.WatchAddressKey(id, a.Hex()))), append(values, v)
	}
	return keys, values
}

// BenchmarkTableBuild1M applies a million address records (the start-up
// read of a large address-watch topic, minus Kafka) and reports the heap the
// table holds per entry.
func BenchmarkTableBuild1M(b *testing.B) {
	const n = 1_000_000
	keys, values := benchRecords(b, n, 43114)
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		tbl := New(Deps{})
		for i := range keys {
			if err := tbl.Apply(keys[i], values[i]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if tbl.Addresses() != n {
			b.Fatalf("%d addresses", tbl.Addresses())
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-bytes/address")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-MiB")
		runtime.KeepAlive(tbl)
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/record")
}
