package match

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/processor/internal/watchlist"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

const benchWatched = 1_000_000

func benchAddress(i int) []byte {
	a := make([]byte, 20)
	binary.BigEndian.PutUint64(a[4:12], uint64(i)*0x9E3779B97F4A7C15)
	binary.BigEndian.PutUint64(a[12:], uint64(i))
	return a
}

var (
	benchOnce  sync.Once
	benchTable *watchlist.Table
)

// millionTable is a table of a million watched addresses over 1,000
// webhooks (every tenth includes internal transactions), built once.
func millionTable(b *testing.B) *watchlist.Table {
	benchOnce.Do(func() {
		tbl := watchlist.New(watchlist.Deps{})
		for h := 0; h < 1000; h++ {
			id := fmt.Sprintf("00000000-0000-4000-8000-%012d", h)
			v, _ := codec.EncodeWatchEntry(&record.WatchEntry{Entry: &record.WatchEntry_Webhook{Webhook: &record.WatchedWebhook{
				WebhookId: id, ChainId: chain, Status: record.WebhookStatus_WEBHOOK_STATUS_ACTIVE, EventType: "address_activity",
				IncludeInternalTxs: h%10 == 0,
			}}})
			if err := tbl.Apply([]byte(id), v); err != nil {
				b.Fatal(err)
			}
		}
		for i := 0; i < benchWatched; i++ {
			id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i%1000)
			a := benchAddress(i)
			ea, _ := evm.AddressFrom(a)
			v, _ := codec.EncodeWatchEntry(&record.WatchEntry{Entry: &record.WatchEntry_Address{Address: &record.WatchedAddress{
				WebhookId: id, ChainId: chain, Address: a,
			}}})
			if err := tbl.Apply([]byte(codec.WatchAddressKey(id, ea.Hex())), v); err != nil {
				b.Fatal(err)
			}
		}
		benchTable = tbl
	})
	return benchTable
}

// busyBlock is a block shaped like a busy C-Chain block: txs transactions,
// each with three logs (two ERC-20 transfers of a popular token and a swap
// event) and six internal calls; hitEvery-th transaction touches a watched
// address (as sender, as a transfer party or through an internal call, in
// turn), the rest touch none.
func busyBlock(txs, hitEvery int) *record.Block {
	r := rand.New(rand.NewPCG(1, 2))
	unwatched := func() []byte {
		a := make([]byte, 20)
		for i := range a {
			a[i] = byte(r.Uint32())
		}
		a[0] = 0xff // benchAddress never starts with 0xff... in its first 4 bytes: they are zero.
		return a
	}
	token, router, pair := unwatched(), unwatched(), unwatched()
	swap := make([]byte, 32)
	swap[0] = 0xd7
	b := &record.Block{ChainId: chain, Number: 1}
	for i := 0; i < txs; i++ {
		from, user := unwatched(), unwatched()
		hit := hitEvery > 0 && i%hitEvery == 0
		if hit && (i/hitEvery)%3 == 0 {
			from = benchAddress(r.IntN(benchWatched))
		}
		if hit && (i/hitEvery)%3 == 1 {
			user = benchAddress(r.IntN(benchWatched))
		}
		internalTo := unwatched()
		if hit && (i/hitEvery)%3 == 2 {
			internalTo = benchAddress(r.IntN(benchWatched))
		}
		tx := &record.Transaction{
			Hash: make([]byte, 32), Index: uint32(i), From: from, To: router, Value: "0",
			Logs: []*record.Log{
				transferLog(token, from, pair, 1000),
				transferLog(token, pair, user, 990),
				{Address: pair, Topics: [][]byte{swap, topic(router), topic(user)}, Data: make([]byte, 128)},
			},
			InternalTransactions: []*record.InternalTransaction{
				{From: from, To: router}, {From: router, To: pair}, {From: pair, To: token},
				{From: pair, To: token}, {From: router, To: token}, {From: router, To: internalTo},
			},
		}
		b.Transactions = append(b.Transactions, tx)
	}
	return b
}

// BenchmarkMatchBlock joins a 250-transaction block against a million
// watched addresses; 2% of the transactions touch one.
func BenchmarkMatchBlock(b *testing.B) {
	for _, bc := range []struct {
		name          string
		txs, hitEvery int
	}{
		{"txs=250/hits=2%", 250, 50},
		{"txs=250/hits=0", 250, 0},
		{"txs=1000/hits=2%", 1000, 50},
	} {
		b.Run(bc.name, func(b *testing.B) {
			m := New(millionTable(b))
			blk := busyBlock(bc.txs, bc.hitEvery)
			var out []Match
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				out = m.Block(blk, out[:0])
			}
			if bc.hitEvery > 0 && len(out) == 0 {
				b.Fatal("no match")
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(bc.txs), "ns/tx")
			b.ReportMetric(float64(len(out)), "matches/block")
		})
	}
}
