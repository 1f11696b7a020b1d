package replay

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Faults make the replay source misbehave as real nodes do, for the node
// fault suite (e2e, make test-nodes): set at start (Config.Faults) or at run
// time with the JSON-RPC method moraine_setFaults(Faults), which the server
// answers only with Config.FaultControl. Shares are probabilities in [0, 1]
// per answer, drawn from Seed.
type Faults struct {
	// LagBlocks holds the served head this many blocks below the released
	// one: a node fallen behind (blocks above its head answer null).
	LagBlocks int64 `json:"lagBlocks,omitempty"`
	// RateLimit is the share of HTTP requests answered 429 with
	// Retry-After: 1, as a rate-limited hosted endpoint does.
	RateLimit float64 `json:"rateLimit,omitempty"`
	// DropLog is the share of receipts answers (with logs) missing one log.
	DropLog float64 `json:"dropLog,omitempty"`
	// DropReceipt is the share of receipts answers missing one receipt.
	DropReceipt float64 `json:"dropReceipt,omitempty"`
	// TruncateTraces is the share of trace answers missing their last
	// transaction's trace.
	TruncateTraces float64 `json:"truncateTraces,omitempty"`
	// Fork is the share of blocks answered, for a few seconds, from another
	// fork: the block's hash is replaced everywhere the block, its receipts
	// and its logs carry it (the answers agree with each other; the next
	// block's parent does not).
	Fork float64 `json:"fork,omitempty"`
	// Seed seeds the draws.
	Seed uint64 `json:"seed,omitempty"`
}

// faults is the server's current Faults and its random source.
type faults struct {
	cur atomic.Pointer[Faults]
	mu  sync.Mutex
	rnd *rand.Rand
	// Counts of what was done, for the suite's report (moraine_faultCounts).
	counts sync.Map // string -> *atomic.Int64
}

func (f *faults) set(v Faults) {
	f.mu.Lock()
	f.rnd = rand.New(rand.NewPCG(v.Seed, 0x6d6f7261696e65))
	f.mu.Unlock()
	f.cur.Store(&v)
}

func (f *faults) get() *Faults { return f.cur.Load() }

// draw reports true with probability p.
func (f *faults) draw(p float64) bool {
	if p <= 0 {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rnd.Float64() < p
}

func (f *faults) count(what string) {
	v, _ := f.counts.LoadOrStore(what, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func (f *faults) snapshot() map[string]int64 {
	out := map[string]int64{}
	f.counts.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// rateLimited answers 429 to a share of requests.
func (s *Server) rateLimited(w http.ResponseWriter) bool {
	ft := s.faults.get()
	if ft == nil || !s.faults.draw(ft.RateLimit) {
		return false
	}
	s.faults.count("rateLimit")
	w.Header().Set("Retry-After", "1")
	http.Error(w, "rate limited", http.StatusTooManyRequests)
	return true
}

// visible is the index of the highest block served: the released one less
// the lag.
func (s *Server) visible() int64 {
	v := s.released.Load()
	if ft := s.faults.get(); ft != nil && ft.LagBlocks > 0 {
		v = max(v-ft.LagBlocks, 0)
	}
	return v
}

// forked reports whether block n is answered from another fork now: a
// draw per block and 5-second period, so that a block's three answers agree
// while it lasts.
func (s *Server) forked(ft *Faults, n uint64) bool {
	if ft.Fork <= 0 {
		return false
	}
	h := fnv.New64a()
	var buf [24]byte
	binary.LittleEndian.PutUint64(buf[0:], ft.Seed)
	binary.LittleEndian.PutUint64(buf[8:], n)
	binary.LittleEndian.PutUint64(buf[16:], uint64(time.Now().Unix()/5))
	h.Write(buf[:])
	return float64(h.Sum64()%1_000_000)/1_000_000 < ft.Fork
}

// forkHash is block hash h (0x-prefixed hex, quoted in JSON) on the other
// fork: its last 8 hex digits changed.
func forkHash(h []byte) []byte {
	out := append([]byte(nil), h...)
	copy(out[len(out)-8:], "f0f0f0f0")
	return out
}

// corrupt applies the faults to one answer of method for block b.
func (s *Server) corrupt(method string, b *Block, out []byte) []byte {
	ft := s.faults.get()
	if ft == nil || b == nil || out == nil {
		return out
	}
	if s.forked(ft, b.Number) {
		if h := blockHashOf(b); h != nil {
			s.faults.count("fork:" + method)
			out = bytes.ReplaceAll(out, h, forkHash(h))
		}
	}
	switch method {
	case "eth_getBlockReceipts":
		if s.faults.draw(ft.DropReceipt) {
			if o, ok := dropElement(out, func(int, json.RawMessage) bool { return true }); ok {
				s.faults.count("dropReceipt")
				out = o
			}
		}
		if s.faults.draw(ft.DropLog) {
			if o, ok := dropLog(out); ok {
				s.faults.count("dropLog")
				out = o
			}
		}
	case "debug_traceBlockByNumber", "debug_traceBlockByHash":
		if s.faults.draw(ft.TruncateTraces) {
			if o, ok := dropElement(out, func(int, json.RawMessage) bool { return true }); ok {
				s.faults.count("truncateTraces")
				out = o
			}
		}
	}
	return out
}

// blockHashOf is the block's hash as its JSON spells it (without quotes).
func blockHashOf(b *Block) []byte {
	var h struct {
		Hash string `json:"hash"`
	}
	if json.Unmarshal(b.Hashes, &h) != nil || len(h.Hash) < 10 {
		return nil
	}
	return []byte(h.Hash)
}

// dropElement removes the last element of a JSON array for which keep
// says so; false when the array is empty.
func dropElement(arr []byte, ok func(int, json.RawMessage) bool) ([]byte, bool) {
	var elems []json.RawMessage
	if json.Unmarshal(arr, &elems) != nil || len(elems) == 0 {
		return arr, false
	}
	for i := len(elems) - 1; i >= 0; i-- {
		if ok(i, elems[i]) {
			out, _ := json.Marshal(append(elems[:i:i], elems[i+1:]...))
			return out, true
		}
	}
	return arr, false
}

// dropLog removes the first log of the first receipt with logs.
func dropLog(receipts []byte) ([]byte, bool) {
	var rs []map[string]json.RawMessage
	if json.Unmarshal(receipts, &rs) != nil {
		return receipts, false
	}
	for _, r := range rs {
		var logs []json.RawMessage
		if json.Unmarshal(r["logs"], &logs) == nil && len(logs) > 0 {
			r["logs"], _ = json.Marshal(logs[1:])
			out, _ := json.Marshal(rs)
			return out, true
		}
	}
	return receipts, false
}

// traceGate paces traced blocks: a node's tracer serves a bounded number
// of blocks per second (Config.TracedBlocksPerSecond), the cost that bounds
// a real backfill.
type traceGate struct {
	mu    sync.Mutex
	every time.Duration
	next  time.Time
}

// wait takes one traced block's turn, or returns ctx's error.
func (g *traceGate) wait(ctx context.Context) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	now := time.Now()
	at := g.next
	if at.Before(now) {
		at = now
	}
	g.next = at.Add(g.every)
	g.mu.Unlock()
	d := time.Until(at)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (s *Server) setFaults(params []json.RawMessage) ([]byte, error) {
	if !s.cfg.FaultControl {
		return nil, &jsonError{Code: -32601, Message: "the method moraine_setFaults does not exist/is not available"}
	}
	var ft Faults
	if len(params) < 1 || json.Unmarshal(params[0], &ft) != nil {
		return nil, errInvalidParams("invalid argument 0: want a Faults object")
	}
	s.faults.set(ft)
	s.log.Info("replay: faults set", "faults", fmt.Sprintf("%+v", ft))
	return trueJSON, nil
}
