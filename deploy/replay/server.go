package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/moraine-data/moraine/deploy/internal/jsonscan"
)

// Modes of a replay server.
const (
	// ModeBackfill exposes every recorded block from the start.
	ModeBackfill = "backfill"
	// ModeLive releases the recorded blocks one by one at Config.Rate blocks
	// per second; blocks above the released head are unknown.
	ModeLive = "live"
)

// Defaults of Config.
const (
	DefaultListenAddress = "127.0.0.1:8545"
	DefaultRate          = 2.0
	maxRequestBody       = 32 << 20
	maxBatch             = 10_000
)

// Config configures a replay server.
type Config struct {
	// File is what to serve: a recording (JSONL, optionally
	// zstd-compressed) or a corpus (its directory or its corpus.json, see
	// OpenCorpus). Ignored when Recording is set.
	File string
	// Recording is an already loaded recording (e.g. shared between tests).
	Recording *Recording
	// ChainID is returned by eth_chainId; 0 means: read it from the recorded
	// transactions (an error if they do not tell).
	ChainID uint64
	// Mode is ModeBackfill (default) or ModeLive.
	Mode string
	// Rate is the number of blocks per second released in live mode (default 2).
	Rate float64
	// ListenAddress is the host:port of the HTTP and WebSocket JSON-RPC
	// server (same port). Port 0 picks a free port: see HTTPURL and WSURL.
	ListenAddress string
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Preload is how many blocks live mode releases at start (default 1):
	// a backfill, then the head.
	Preload int
	// TracedBlocksPerSecond caps the blocks traced per second (0: no cap):
	// a real node's tracer is what bounds a backfill with traces.
	TracedBlocksPerSecond float64
	// Faults are misbehaviours to start with (see Faults).
	Faults Faults
	// FaultControl enables moraine_setFaults and moraine_faultCounts.
	FaultControl bool
}

// Server serves a recording over JSON-RPC (HTTP and WebSocket).
type Server struct {
	cfg     Config
	src     Source
	log     *slog.Logger
	chainID []byte // JSON hex quantity
	netVer  []byte // JSON decimal string

	released atomic.Int64 // index of the highest released block
	headMu   sync.Mutex
	headCh   chan struct{} // closed and replaced whenever the head moves

	ln       net.Listener
	http     *http.Server
	upgrader websocket.Upgrader
	done     chan struct{}
	wg       sync.WaitGroup
	once     sync.Once
	closeErr error
	subSeq   atomic.Uint64
	faults   faults
	tracer   *traceGate
}

// Start loads the recording (unless given), listens and serves until Close is
// called or ctx is done.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ListenAddress == "" {
		cfg.ListenAddress = DefaultListenAddress
	}
	switch cfg.Mode {
	case "":
		cfg.Mode = ModeBackfill
	case ModeBackfill, ModeLive:
	default:
		return nil, fmt.Errorf("replay: unknown mode %q (want %s or %s)", cfg.Mode, ModeBackfill, ModeLive)
	}
	if cfg.Rate <= 0 {
		cfg.Rate = DefaultRate
	}
	var src Source = cfg.Recording
	if cfg.Recording == nil {
		if cfg.File == "" {
			return nil, errors.New("replay: no file")
		}
		start := time.Now()
		var err error
		if src, err = OpenSource(cfg.File); err != nil {
			return nil, err
		}
		cfg.Logger.Info("replay: source opened", "file", cfg.File, "blocks", src.Len(), "txs", src.TxCount(),
			"first", src.First(), "last", src.Last(), "elapsed", time.Since(start).Round(time.Millisecond))
	}
	if cfg.ChainID == 0 {
		cfg.ChainID = src.ChainID()
		if cfg.ChainID == 0 {
			return nil, errors.New("replay: the recording does not tell its chain id: set it (--chain.id)")
		}
	}
	s := &Server{
		cfg:     cfg,
		src:     src,
		log:     cfg.Logger,
		chainID: []byte(`"0x` + strconv.FormatUint(cfg.ChainID, 16) + `"`),
		netVer:  []byte(`"` + strconv.FormatUint(cfg.ChainID, 10) + `"`),
		headCh:  make(chan struct{}),
		done:    make(chan struct{}),
		upgrader: websocket.Upgrader{
			ReadBufferSize:  4096,
			WriteBufferSize: 64 << 10,
			CheckOrigin:     func(*http.Request) bool { return true },
		},
	}
	if cfg.Mode == ModeBackfill {
		s.released.Store(int64(src.Len() - 1))
	} else {
		s.released.Store(int64(min(max(cfg.Preload, 1), src.Len()) - 1))
	}
	s.faults.set(cfg.Faults)
	if cfg.TracedBlocksPerSecond > 0 {
		s.tracer = &traceGate{every: time.Duration(float64(time.Second) / cfg.TracedBlocksPerSecond)}
	}
	ln, err := net.Listen("tcp", cfg.ListenAddress)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	s.ln = ln
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("replay: serve", "err", err)
		}
	}()
	if cfg.Mode == ModeLive {
		s.wg.Add(1)
		go s.releaseLoop()
	}
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-s.done:
		}
	}()
	s.log.Info("replay: serving", "http", s.HTTPURL(), "ws", s.WSURL(), "mode", cfg.Mode,
		"rate", cfg.Rate, "chainId", cfg.ChainID, "head", s.Head())
	return s, nil
}

// releaseLoop advances the head in live mode.
func (s *Server) releaseLoop() {
	defer s.wg.Done()
	ticker := time.NewTicker(time.Duration(float64(time.Second) / s.cfg.Rate))
	defer ticker.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-ticker.C:
			next := s.released.Load() + 1
			if next >= int64(s.src.Len()) {
				s.log.Info("replay: every recorded block released", "head", s.src.Last())
				return
			}
			s.released.Store(next)
			s.headMu.Lock()
			close(s.headCh)
			s.headCh = make(chan struct{})
			s.headMu.Unlock()
		}
	}
}

// headChanged returns a channel closed at the next head change.
func (s *Server) headChanged() <-chan struct{} {
	s.headMu.Lock()
	defer s.headMu.Unlock()
	return s.headCh
}

// Close stops the server and closes every connection.
func (s *Server) Close() error {
	s.once.Do(func() {
		close(s.done)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.closeErr = s.http.Shutdown(ctx) // hijacked WebSocket connections close on s.done
		s.wg.Wait()
	})
	return s.closeErr
}

// HTTPURL is the JSON-RPC HTTP endpoint, e.g. http://127.0.0.1:8545.
func (s *Server) HTTPURL() string { return "http://" + s.ln.Addr().String() }

// WSURL is the JSON-RPC WebSocket endpoint, e.g. ws://127.0.0.1:8545.
func (s *Server) WSURL() string { return "ws://" + s.ln.Addr().String() }

// Source is what is being served.
func (s *Server) Source() Source { return s.src }

// Head is the number of the highest released block.
func (s *Server) Head() uint64 { return s.src.number(int(s.visible())) }

// lookups honouring the released head; a nil block without error is an
// unknown or unreleased one.

func (s *Server) head() (*Block, error) { return s.src.load(int(s.visible())) }

func (s *Server) blockByNumber(n uint64) (*Block, error) {
	i, ok := s.src.index(n)
	if !ok || int64(i) > s.visible() {
		return nil, nil
	}
	return s.src.load(i)
}

func (s *Server) blockByHash(h Hash) (*Block, error) {
	i, ok := s.src.hashIndex(h)
	if !ok || int64(i) > s.visible() {
		return nil, nil
	}
	return s.src.load(i)
}

// tx finds a released transaction: its block and position.
func (s *Server) tx(h Hash) (*Block, int, error) {
	bi, ti, ok := s.src.txLocation(h)
	if !ok || int64(bi) > s.visible() {
		return nil, 0, nil
	}
	b, err := s.src.load(bi)
	if err != nil || ti >= len(b.txs) {
		return nil, 0, err
	}
	return b, ti, nil
}

// ServeHTTP serves JSON-RPC over HTTP POST and upgrades WebSocket requests.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if websocket.IsWebSocketUpgrade(r) {
		s.serveWS(w, r)
		return
	}
	w.Header().Set("Access-Control-Allow-Origin", "*")
	switch r.Method {
	case http.MethodPost:
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		// Health checks and CORS preflight, as geth answers them.
		w.Header().Set("Access-Control-Allow-Headers", "Content-Type")
		w.WriteHeader(http.StatusOK)
		return
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		http.Error(w, "request too large", http.StatusRequestEntityTooLarge)
		return
	}
	if !bytes.Contains(body, []byte(`"moraine_`)) && s.rateLimited(w) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	bw := bufio.NewWriterSize(w, 64<<10)
	s.handleMessage(r.Context(), body, nil, func(p []byte) { bw.Write(p) })
	bw.Flush()
}

// jsonError is a JSON-RPC error.
type jsonError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *jsonError) Error() string { return e.Message }

func errInvalidParams(format string, a ...any) *jsonError {
	return &jsonError{Code: -32602, Message: fmt.Sprintf(format, a...)}
}

// request is one JSON-RPC call.
type request struct {
	Version string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

var (
	nullJSON  = []byte("null")
	trueJSON  = []byte("true")
	falseJSON = []byte("false")
)

// handleMessage answers a single request or a batch; write is called with the
// response's pieces (nothing for a notification). ws is nil over HTTP.
func (s *Server) handleMessage(ctx context.Context, msg []byte, ws *wsConn, write func([]byte)) {
	i := jsonscan.SkipWS(msg, 0)
	if i < len(msg) && msg[i] == '[' {
		var batch []json.RawMessage
		if err := json.Unmarshal(msg, &batch); err != nil {
			answer{id: nullJSON, err: &jsonError{Code: -32700, Message: "parse error"}}.writeTo(write)
			return
		}
		if len(batch) == 0 {
			answer{id: nullJSON, err: &jsonError{Code: -32600, Message: "empty batch"}}.writeTo(write)
			return
		}
		if len(batch) > maxBatch {
			answer{id: nullJSON, err: &jsonError{Code: -32600, Message: "batch too large"}}.writeTo(write)
			return
		}
		first := true
		for _, m := range batch {
			a, ok := s.handleCall(ctx, m, ws)
			if !ok {
				continue
			}
			if first {
				write([]byte{'['})
				first = false
			} else {
				write([]byte{','})
			}
			a.writeTo(write)
		}
		if !first {
			write([]byte{']'})
		}
		return
	}
	if a, ok := s.handleCall(ctx, msg, ws); ok {
		a.writeTo(write)
	}
}

// answer is one call's answer: its id and either its result (a JSON value)
// or its error.
type answer struct {
	id, result []byte
	err        *jsonError
}

// writeTo writes the answer in pieces: results are up to megabytes of
// recorded JSON, written as they are stored rather than copied into an
// answer first.
func (a answer) writeTo(write func([]byte)) {
	write([]byte(`{"jsonrpc":"2.0","id":`))
	write(a.id)
	if a.err != nil {
		msg, _ := json.Marshal(a.err)
		write([]byte(`,"error":`))
		write(msg)
	} else {
		write([]byte(`,"result":`))
		write(a.result)
	}
	write([]byte{'}'})
}

// handleCall answers one call; ok is false for a notification (no id),
// which gets no answer.
func (s *Server) handleCall(ctx context.Context, msg []byte, ws *wsConn) (a answer, ok bool) {
	var req request
	if err := json.Unmarshal(msg, &req); err != nil {
		return answer{id: nullJSON, err: &jsonError{Code: -32700, Message: "parse error"}}, true
	}
	if req.ID == nil {
		// A notification: run nothing that answers.
		return answer{}, false
	}
	if req.Method == "" {
		return answer{id: req.ID, err: &jsonError{Code: -32600, Message: "invalid request"}}, true
	}
	var params []json.RawMessage
	if len(req.Params) > 0 && !bytes.Equal(req.Params, nullJSON) {
		if err := json.Unmarshal(req.Params, &params); err != nil {
			return answer{id: req.ID, err: errInvalidParams("non-array args")}, true
		}
	}
	result, err := s.call(ctx, req.Method, params, ws)
	if err != nil {
		var je *jsonError
		if !errors.As(err, &je) {
			je = &jsonError{Code: -32000, Message: err.Error()}
		}
		return answer{id: req.ID, err: je}, true
	}
	return answer{id: req.ID, result: result}, true
}

// call dispatches a method. The returned bytes are a JSON value.
func (s *Server) call(ctx context.Context, method string, params []json.RawMessage, ws *wsConn) ([]byte, error) {
	switch method {
	case "eth_chainId":
		return s.chainID, nil
	case "net_version":
		return s.netVer, nil
	case "web3_clientVersion":
		return []byte(`"moraine-replay/v1"`), nil
	case "eth_syncing":
		return falseJSON, nil
	case "eth_blockNumber":
		return quantity(s.Head()), nil

	case "eth_getBlockByNumber", "eth_getBlockByHash":
		if len(params) < 1 {
			return nil, errInvalidParams("missing value for required argument 0")
		}
		full := false
		if len(params) > 1 {
			if err := json.Unmarshal(params[1], &full); err != nil {
				return nil, errInvalidParams("invalid argument 1: %v", err)
			}
		}
		var b *Block
		var err error
		if method == "eth_getBlockByNumber" {
			b, err = s.blockByNumberParam(params[0])
		} else {
			b, err = s.blockByHashParam(params[0])
		}
		if err != nil || b == nil {
			return nullJSON, err
		}
		if full {
			return s.corrupt(method, b, b.Full), nil
		}
		return s.corrupt(method, b, b.Hashes), nil

	case "eth_getBlockReceipts":
		if len(params) < 1 {
			return nil, errInvalidParams("missing value for required argument 0")
		}
		b, err := s.blockByNumberOrHashParam(params[0])
		if err != nil || b == nil {
			return nullJSON, err
		}
		return s.corrupt(method, b, b.Receipts), nil

	case "eth_getTransactionByHash", "eth_getTransactionReceipt", "debug_traceTransaction":
		if len(params) < 1 {
			return nil, errInvalidParams("missing value for required argument 0")
		}
		h, err := parseHash(params[0])
		if err != nil {
			return nil, errInvalidParams("invalid argument 0: %v", err)
		}
		b, i, err := s.tx(h)
		if err != nil {
			return nil, err
		}
		switch {
		case method == "debug_traceTransaction":
			if err := checkTracer(params, 1); err != nil {
				return nil, err
			}
			if b == nil || b.txTrace[i] == nil {
				return nil, errors.New("transaction not found")
			}
			return b.txTrace[i], nil
		case b == nil:
			return nullJSON, nil
		case method == "eth_getTransactionByHash":
			return b.txs[i], nil
		default:
			if b.txReceipt[i] == nil {
				return nullJSON, nil
			}
			return b.txReceipt[i], nil
		}

	case "debug_traceBlockByNumber", "debug_traceBlockByHash":
		if len(params) < 1 {
			return nil, errInvalidParams("missing value for required argument 0")
		}
		if err := checkTracer(params, 1); err != nil {
			return nil, err
		}
		if method == "debug_traceBlockByNumber" {
			n, latest, err := s.numberParam(params[0], 0)
			if err != nil {
				return nil, err
			}
			var b *Block
			if latest {
				b, err = s.head()
			} else {
				b, err = s.blockByNumber(n)
			}
			if err != nil {
				return nil, err
			}
			if b == nil {
				return nil, fmt.Errorf("block #%d not found", n)
			}
			if err := s.tracer.wait(ctx); err != nil {
				return nil, err
			}
			return s.corrupt(method, b, b.Traces), nil
		}
		h, err := parseHash(params[0])
		if err != nil {
			return nil, errInvalidParams("invalid argument 0: %v", err)
		}
		b, err := s.blockByHash(h)
		if err != nil {
			return nil, err
		}
		if b == nil {
			return nil, fmt.Errorf("block 0x%x not found", h[:])
		}
		if err := s.tracer.wait(ctx); err != nil {
			return nil, err
		}
		return s.corrupt(method, b, b.Traces), nil

	case "moraine_recordedBlockNumbers":
		return s.recordedBlockNumbers(params)
	case "moraine_setFaults":
		return s.setFaults(params)
	case "moraine_faultCounts":
		if !s.cfg.FaultControl {
			break
		}
		return json.Marshal(s.faults.snapshot())

	case "eth_call", "eth_getCode":
		// No state is recorded: answer as a node does for an address without
		// code (an error would read as a node failing).
		return []byte(`"0x"`), nil

	case "eth_getBalance":
		// No state is recorded, and a balance of 0 would be a wrong answer:
		// say so as a pruned node does, which clients take as "no answer at
		// that block", not as the node failing.
		return nil, &jsonError{Code: -32000, Message: "historical state not available: the replay source serves recorded blocks, not state"}

	case "eth_subscribe":
		if ws == nil {
			return nil, &jsonError{Code: -32601, Message: "notifications not supported"}
		}
		var kind string
		if len(params) < 1 || json.Unmarshal(params[0], &kind) != nil {
			return nil, errInvalidParams("invalid argument 0")
		}
		if kind != "newHeads" {
			return nil, &jsonError{Code: -32601, Message: fmt.Sprintf("no %q subscription in eth namespace", kind)}
		}
		id := fmt.Sprintf("0x%032x", s.subSeq.Add(1))
		ws.subscribe(ctx, id)
		return json.Marshal(id)
	case "eth_unsubscribe":
		if ws == nil {
			return nil, &jsonError{Code: -32601, Message: "notifications not supported"}
		}
		var id string
		if len(params) < 1 || json.Unmarshal(params[0], &id) != nil {
			return nil, errInvalidParams("invalid argument 0")
		}
		if ws.unsubscribe(id) {
			return trueJSON, nil
		}
		return falseJSON, nil
	}
	return nil, &jsonError{Code: -32601, Message: fmt.Sprintf("the method %s does not exist/is not available", method)}
}

// checkTracer accepts a missing config only as an error: the recording holds
// callTracer output and nothing else.
func checkTracer(params []json.RawMessage, i int) error {
	if len(params) <= i || bytes.Equal(params[i], nullJSON) {
		return errInvalidParams("this replay only has callTracer traces: pass {\"tracer\":\"callTracer\"}")
	}
	var cfg struct {
		Tracer       string `json:"tracer"`
		TracerConfig struct {
			OnlyTopCall bool `json:"onlyTopCall"`
		} `json:"tracerConfig"`
	}
	if err := json.Unmarshal(params[i], &cfg); err != nil {
		return errInvalidParams("invalid argument %d: %v", i, err)
	}
	if cfg.Tracer != "callTracer" {
		return errInvalidParams("this replay only has callTracer traces, not %q", cfg.Tracer)
	}
	if cfg.TracerConfig.OnlyTopCall {
		return errInvalidParams("this replay has full callTracer traces: onlyTopCall is not supported")
	}
	return nil
}

// numberParam parses argument i, a block number or tag; latest is true for
// head tags.
func (s *Server) numberParam(raw json.RawMessage, i int) (n uint64, latest bool, err error) {
	var str string
	if err := json.Unmarshal(raw, &str); err != nil {
		// Not a string: accept a plain JSON integer.
		v, perr := strconv.ParseUint(string(raw), 10, 64)
		if perr != nil {
			return 0, false, errInvalidParams("invalid argument %d: hex string without 0x prefix", i)
		}
		return v, false, nil
	}
	switch str {
	case "latest", "pending", "safe", "finalized":
		return s.Head(), true, nil
	case "earliest":
		return s.src.First(), false, nil
	}
	if !strings.HasPrefix(str, "0x") && !strings.HasPrefix(str, "0X") {
		return 0, false, errInvalidParams("invalid argument %d: hex string without 0x prefix", i)
	}
	v, perr := strconv.ParseUint(str[2:], 16, 64)
	if perr != nil {
		return 0, false, errInvalidParams("invalid argument %d: invalid hex number %q", i, str)
	}
	return v, false, nil
}

func (s *Server) blockByNumberParam(raw json.RawMessage) (*Block, error) {
	n, latest, err := s.numberParam(raw, 0)
	if err != nil {
		return nil, err
	}
	if latest {
		return s.head()
	}
	return s.blockByNumber(n)
}

func (s *Server) blockByHashParam(raw json.RawMessage) (*Block, error) {
	h, err := parseHash(raw)
	if err != nil {
		return nil, errInvalidParams("invalid argument 0: %v", err)
	}
	return s.blockByHash(h)
}

// blockByNumberOrHashParam accepts a number, a tag, a hash, or an object
// {"blockNumber": ...} / {"blockHash": ...}.
func (s *Server) blockByNumberOrHashParam(raw json.RawMessage) (*Block, error) {
	i := jsonscan.SkipWS(raw, 0)
	if i < len(raw) && raw[i] == '{' {
		var obj struct {
			BlockNumber json.RawMessage `json:"blockNumber"`
			BlockHash   json.RawMessage `json:"blockHash"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, errInvalidParams("invalid argument 0: %v", err)
		}
		switch {
		case obj.BlockHash != nil:
			return s.blockByHashParam(obj.BlockHash)
		case obj.BlockNumber != nil:
			return s.blockByNumberParam(obj.BlockNumber)
		}
		return nil, errInvalidParams("invalid argument 0: neither blockNumber nor blockHash")
	}
	if len(raw) == 68 { // "0x" + 64 hex digits + quotes
		return s.blockByHashParam(raw)
	}
	return s.blockByNumberParam(raw)
}

// recordedBlockNumbers answers moraine_recordedBlockNumbers(from, to): the
// numbers of the released recorded blocks within [from, to], ascending, as
// hex quantities. An indexer learns a sparse recording's numbers from it in
// one call instead of probing every number of the range.
func (s *Server) recordedBlockNumbers(params []json.RawMessage) ([]byte, error) {
	if len(params) != 2 {
		return nil, errInvalidParams("want 2 arguments (from, to), got %d", len(params))
	}
	var bounds [2]uint64
	for i, p := range params {
		n, latest, err := s.numberParam(p, i)
		if err != nil {
			return nil, err
		}
		if latest {
			n = s.Head()
		}
		bounds[i] = n
	}
	released := int(s.visible()) + 1
	i := sort.Search(released, func(i int) bool { return s.src.number(i) >= bounds[0] })
	out := []byte{'['}
	for ; i < released && s.src.number(i) <= bounds[1]; i++ {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, quantity(s.src.number(i))...)
	}
	return append(out, ']'), nil
}

func quantity(n uint64) []byte {
	return []byte(`"0x` + strconv.FormatUint(n, 16) + `"`)
}
