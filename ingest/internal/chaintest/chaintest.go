// Package chaintest is a fake EVM node for ingest's tests: an httptest
// JSON-RPC server (HTTP batches and WebSocket newHeads) that serves recorded
// blocks from shared/data, with knobs to lag (answer null), fail, and switch
// to another branch.
package chaintest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/klauspost/compress/zstd"

	"github.com/moraine-data/moraine/pkg/testenv"
)

// Block is one recorded block: the three RPC results.
type Block struct {
	Number   uint64
	Hash     string
	Parent   string
	TxCount  int
	Block    json.RawMessage
	Receipts json.RawMessage
	Traces   json.RawMessage
}

// Load reads a recorded JSONL file of shared/data (zstd or plain).
func Load(t testing.TB, rel string) []Block {
	t.Helper()
	f, err := os.Open(testenv.SharedData(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(rel, ".zst") {
		zr, err := zstd.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		r = zr
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	var out []Block
	for sc.Scan() {
		var l struct {
			Block    json.RawMessage `json:"block"`
			Receipts json.RawMessage `json:"receipts"`
			Traces   json.RawMessage `json:"traces"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		out = append(out, NewBlock(t, l.Block, l.Receipts, l.Traces))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// NewBlock builds a Block from its three results.
func NewBlock(t testing.TB, block, receipts, traces json.RawMessage) Block {
	t.Helper()
	var h struct {
		Number       string            `json:"number"`
		Hash         string            `json:"hash"`
		ParentHash   string            `json:"parentHash"`
		Transactions []json.RawMessage `json:"transactions"`
	}
	if err := json.Unmarshal(block, &h); err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(strings.TrimPrefix(h.Number, "0x"), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return Block{Number: n, Hash: h.Hash, Parent: h.ParentHash, TxCount: len(h.Transactions),
		Block: block, Receipts: receipts, Traces: traces}
}

// Fork returns a copy of b on another branch: its hash becomes hash, its
// parent parent, everywhere the recorded JSON mentions them (block,
// transactions, receipts, logs). With empty set, the block loses its
// transactions, so that the branch's transaction counts differ; its header
// then commits to no transactions and no receipts (the empty trie and an
// empty bloom), as a real empty block's does, so that it verifies.
func Fork(t testing.TB, b Block, hash, parent string, empty bool) Block {
	t.Helper()
	rep := func(m json.RawMessage) json.RawMessage {
		m = bytes.ReplaceAll(m, []byte(b.Hash), []byte(hash))
		return bytes.ReplaceAll(m, []byte(`"parentHash":"`+b.Parent+`"`), []byte(`"parentHash":"`+parent+`"`))
	}
	block, receipts, traces := rep(b.Block), rep(b.Receipts), b.Traces
	if empty {
		var m map[string]any
		if err := json.Unmarshal(block, &m); err != nil {
			t.Fatal(err)
		}
		m["transactions"] = []any{}
		const emptyRoot = "0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421"
		m["transactionsRoot"], m["receiptsRoot"] = emptyRoot, emptyRoot
		m["logsBloom"] = "0x" + strings.Repeat("00", 256)
		block, _ = json.Marshal(m)
		receipts, traces = json.RawMessage("[]"), json.RawMessage("[]")
	}
	return NewBlock(t, block, receipts, traces)
}

// ForkHash derives a distinct, well-formed hash from h.
func ForkHash(h string, branch int) string {
	return h[:len(h)-8] + fmt.Sprintf("%08x", 0xf0000000+branch)
}

// Node is the fake node.
type Node struct {
	// corrupt, when set, rewrites the node's answers (SetCorrupt).
	corrupt  atomic.Value
	srv      *httptest.Server
	upgrader websocket.Upgrader

	mu       sync.Mutex
	blocks   map[uint64]Block
	head     uint64
	earliest uint64
	nulls    map[uint64]int // answer null for the block this many more times
	fail     int            // fail this many more HTTP requests with 503
	subs     map[*websocket.Conn]*sync.Mutex
	noWS     bool
	delay    time.Duration
	listing  bool

	// Posts counts HTTP POSTs; Calls counts JSON-RPC calls.
	Posts atomic.Int64
	Calls atomic.Int64
	// Methods counts calls per method.
	methods sync.Map
}

// NewNode starts a node serving blocks; the head is the highest block.
func NewNode(t testing.TB, blocks []Block) *Node {
	n := &Node{blocks: map[uint64]Block{}, nulls: map[uint64]int{}, subs: map[*websocket.Conn]*sync.Mutex{}}
	n.earliest = ^uint64(0)
	for _, b := range blocks {
		n.blocks[b.Number] = b
		n.head = max(n.head, b.Number)
		n.earliest = min(n.earliest, b.Number)
	}
	n.srv = httptest.NewServer(n)
	t.Cleanup(n.Close)
	return n
}

// Close stops the server.
func (n *Node) Close() {
	n.mu.Lock()
	for c := range n.subs {
		c.Close()
	}
	n.mu.Unlock()
	n.srv.CloseClientConnections()
	n.srv.Close()
}

// URL is the HTTP endpoint; WSURL the WebSocket one.
func (n *Node) URL() string   { return n.srv.URL }
func (n *Node) WSURL() string { return "ws" + strings.TrimPrefix(n.srv.URL, "http") }

// SetHead sets the announced head and notifies newHeads subscribers.
func (n *Node) SetHead(h uint64) {
	n.mu.Lock()
	n.head = h
	b, ok := n.blocks[h]
	subs := make(map[*websocket.Conn]*sync.Mutex, len(n.subs))
	for c, m := range n.subs {
		subs[c] = m
	}
	n.mu.Unlock()
	hash := ""
	if ok {
		hash = b.Hash
	}
	msg := fmt.Sprintf(`{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"0x1","result":{"number":"0x%x","hash":%q}}}`, h, hash)
	for c, m := range subs {
		m.Lock()
		_ = c.WriteMessage(websocket.TextMessage, []byte(msg))
		m.Unlock()
	}
}

// Head is the announced head.
func (n *Node) Head() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.head
}

// Put adds or replaces blocks (another branch) without moving the head.
func (n *Node) Put(blocks ...Block) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, b := range blocks {
		n.blocks[b.Number] = b
	}
}

// NullFor makes the node answer null for block num the next times calls.
func (n *Node) NullFor(num uint64, times int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.nulls[num] = times
}

// FailRequests makes the next count HTTP requests fail with 503.
func (n *Node) FailRequests(count int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.fail = count
}

// SetCorrupt makes the node pass every block, receipts and traces answer
// through fn (nil: answer as recorded): a node giving wrong answers.
func (n *Node) SetCorrupt(fn func(method string, result json.RawMessage) json.RawMessage) {
	n.corrupt.Store(&fn)
	if fn == nil {
		n.corrupt.Store((*func(string, json.RawMessage) json.RawMessage)(nil))
	}
}

// DropFirstLog removes the first log of the first receipt that has logs:
// a receipts answer missing a log, as node bugs produce.
func DropFirstLog(method string, result json.RawMessage) json.RawMessage {
	if method != "eth_getBlockReceipts" {
		return result
	}
	var rs []map[string]json.RawMessage
	if json.Unmarshal(result, &rs) != nil {
		return result
	}
	for _, r := range rs {
		var logs []json.RawMessage
		if json.Unmarshal(r["logs"], &logs) == nil && len(logs) > 0 {
			r["logs"], _ = json.Marshal(logs[1:])
			out, _ := json.Marshal(rs)
			return out
		}
	}
	return result
}

// TruncateTraces removes the last entry of every non-empty trace list.
func TruncateTraces(method string, result json.RawMessage) json.RawMessage {
	if method != "debug_traceBlockByNumber" {
		return result
	}
	var ts []json.RawMessage
	if json.Unmarshal(result, &ts) != nil || len(ts) == 0 {
		return result
	}
	out, _ := json.Marshal(ts[:len(ts)-1])
	return out
}

// DisableWS makes WebSocket upgrades fail (polling fallback).
func (n *Node) DisableWS() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.noWS = true
}

// MethodCalls is how many times method was called.
func (n *Node) MethodCalls(method string) int64 {
	v, ok := n.methods.Load(method)
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

func (n *Node) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if websocket.IsWebSocketUpgrade(r) {
		n.serveWS(w, r)
		return
	}
	n.Posts.Add(1)
	n.mu.Lock()
	delay := n.delay
	n.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	n.mu.Lock()
	fail := n.fail > 0
	if fail {
		n.fail--
	}
	n.mu.Unlock()
	if fail {
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(n.handle(body))
}

type call struct {
	ID     json.RawMessage   `json:"id"`
	Method string            `json:"method"`
	Params []json.RawMessage `json:"params"`
}

func (n *Node) handle(body []byte) []byte {
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		var calls []call
		if err := json.Unmarshal(body, &calls); err != nil {
			return []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`)
		}
		var out bytes.Buffer
		out.WriteByte('[')
		// Answer in reverse order: clients must match answers by id.
		for i := len(calls) - 1; i >= 0; i-- {
			if i < len(calls)-1 {
				out.WriteByte(',')
			}
			out.Write(n.answer(calls[i]))
		}
		out.WriteByte(']')
		return out.Bytes()
	}
	var c call
	if err := json.Unmarshal(body, &c); err != nil {
		return []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`)
	}
	return n.answer(c)
}

func (n *Node) answer(c call) []byte {
	n.Calls.Add(1)
	v, _ := n.methods.LoadOrStore(c.Method, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	result, rpcErr := n.call(c)
	id := c.ID
	if id == nil {
		id = json.RawMessage("null")
	}
	if rpcErr != "" {
		code := -32000
		if strings.HasPrefix(rpcErr, "the method ") {
			code = -32601 // as go-ethereum answers an unknown method
		}
		return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%q}}`, id, code, rpcErr))
	}
	return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result))
}

func (n *Node) call(c call) (json.RawMessage, string) {
	switch c.Method {
	case "eth_chainId":
		return json.RawMessage(`"0xa86a"`), ""
	case "eth_blockNumber":
		return json.RawMessage(fmt.Sprintf(`"0x%x"`, n.Head())), ""
	case "eth_getBlockByNumber", "eth_getBlockReceipts", "debug_traceBlockByNumber":
		if len(c.Params) == 0 {
			return nil, "missing params"
		}
		b, ok := n.lookup(c.Params[0], c.Method == "eth_getBlockByNumber")
		if !ok {
			if c.Method == "debug_traceBlockByNumber" {
				return nil, "block not found"
			}
			return json.RawMessage("null"), ""
		}
		var out json.RawMessage
		switch c.Method {
		case "eth_getBlockByNumber":
			out = b.Block
		case "eth_getBlockReceipts":
			out = b.Receipts
		default:
			out = b.Traces
		}
		if f, _ := n.corrupt.Load().(*func(string, json.RawMessage) json.RawMessage); f != nil {
			out = (*f)(c.Method, out)
		}
		return out, ""
	case "moraine_recordedBlockNumbers":
		if n.listsBlocks() {
			return n.recordedBlockNumbers(c.Params)
		}
	}
	return nil, "the method " + c.Method + " does not exist/is not available"
}

// ListBlocks makes the node answer moraine_recordedBlockNumbers(from, to)
// as moraine's replay source does.
func (n *Node) ListBlocks() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.listing = true
}

func (n *Node) listsBlocks() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.listing
}

func (n *Node) recordedBlockNumbers(params []json.RawMessage) (json.RawMessage, string) {
	var bounds [2]uint64
	for i := range bounds {
		var s string
		if len(params) != 2 || json.Unmarshal(params[i], &s) != nil {
			return nil, "want two hex numbers"
		}
		v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
		if err != nil {
			return nil, err.Error()
		}
		bounds[i] = v
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	out := []string{}
	for num := bounds[0]; num <= min(bounds[1], n.head); num++ {
		if _, ok := n.blocks[num]; ok {
			out = append(out, fmt.Sprintf("0x%x", num))
		}
	}
	raw, _ := json.Marshal(out)
	return raw, ""
}

// lookup finds a block by number parameter; blocks above the head, and
// blocks told to lag, are not found. countNull consumes one lagging answer.
func (n *Node) lookup(param json.RawMessage, countNull bool) (Block, bool) {
	var s string
	if err := json.Unmarshal(param, &s); err != nil {
		return Block{}, false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	var num uint64
	switch s {
	case "latest":
		num = n.head
	case "earliest":
		num = n.earliest
	default:
		v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
		if err != nil {
			return Block{}, false
		}
		num = v
	}
	if num > n.head {
		return Block{}, false
	}
	if k := n.nulls[num]; k > 0 {
		if countNull {
			n.nulls[num] = k - 1
		}
		return Block{}, false
	}
	b, ok := n.blocks[num]
	return b, ok
}

func (n *Node) serveWS(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	noWS := n.noWS
	n.mu.Unlock()
	if noWS {
		http.Error(w, "no websocket here", http.StatusNotFound)
		return
	}
	c, err := n.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	wmu := &sync.Mutex{}
	defer func() {
		n.mu.Lock()
		delete(n.subs, c)
		n.mu.Unlock()
		c.Close()
	}()
	for {
		_, msg, err := c.ReadMessage()
		if err != nil {
			return
		}
		var cl call
		if json.Unmarshal(msg, &cl) != nil {
			continue
		}
		var resp []byte
		if cl.Method == "eth_subscribe" {
			resp = []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":"0x1"}`, cl.ID))
			n.mu.Lock()
			n.subs[c] = wmu
			n.mu.Unlock()
		} else {
			resp = n.answer(cl)
		}
		wmu.Lock()
		err = c.WriteMessage(websocket.TextMessage, resp)
		wmu.Unlock()
		if err != nil {
			return
		}
	}
}

// SetHeadQuietly moves the head without notifying subscribers: a
// subscription that silently stopped delivering.
func (n *Node) SetHeadQuietly(h uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.head = h
}

// SetDelay makes every HTTP request wait d before it is answered: a slow
// node, so that a test can stop ingest in the middle of a backfill.
func (n *Node) SetDelay(d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.delay = d
}
