package follow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/moraine-data/moraine/ingest/internal/convert"
	"github.com/moraine-data/moraine/ingest/internal/verify"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/rpc"
	"github.com/moraine-data/moraine/schemas/record"
)

// span is a range of block numbers [start, end) fetched as one unit.
type span struct{ start, end uint64 }

func (s span) len() uint64 { return s.end - s.start }

// fetched is a span's blocks in ascending order. In replay mode numbers the
// recording lacks are simply absent.
type fetched struct {
	span
	blocks []*record.Block
	err    error
}

func hexNumber(n uint64) string { return "0x" + strconv.FormatUint(n, 16) }

var traceParams = map[string]string{"tracer": "callTracer"}

// fetchSpan fetches and converts the blocks of sp. It retries until it has
// every block (or, in replay mode, knows which ones the recording lacks);
// it returns an error only when ctx ends.
func (f *Follower) fetchSpan(ctx context.Context, sp span) ([]*record.Block, error) {
	start := time.Now()
	defer func() { f.deps.Metrics.stage.WithLabelValues(f.chain, stageFetch).Observe(time.Since(start).Seconds()) }()

	numbers := make([]uint64, 0, sp.len())
	if f.cfg.Chain.Replay && sp.len() > uint64(f.cfg.BatchBlocks) {
		// A sparse recording: ask which numbers exist before fetching
		// full blocks.
		var err error
		if numbers, err = f.recorded(ctx, sp); err != nil {
			return nil, err
		}
	} else {
		for n := sp.start; n < sp.end; n++ {
			numbers = append(numbers, n)
		}
	}
	out := make([]*record.Block, 0, len(numbers))
	for i := 0; i < len(numbers); i += f.cfg.BatchBlocks {
		chunk := numbers[i:min(i+f.cfg.BatchBlocks, len(numbers))]
		blocks, err := f.fetchBlocks(ctx, chunk)
		if err != nil {
			return nil, err
		}
		out = append(out, blocks...)
	}
	return out, nil
}

// recorded returns the numbers of sp for which a replay source has a block:
// from moraine_recordedBlockNumbers, one call for the span, when the source
// has it (moraine's replay does), or else by probing every number.
func (f *Follower) recorded(ctx context.Context, sp span) ([]uint64, error) {
	var numbers []uint64
	listed := false
	err := f.retry(100*time.Millisecond, 5*time.Second, "listing recorded blocks failed, retrying", sp.start).Do(ctx, func() error {
		if f.noListing.Load() {
			return nil
		}
		// Only a node that has released the whole span can list it.
		raw, err := f.deps.RPC.CallWith(ctx, []rpc.Option{rpc.AtBlock(sp.end - 1)}, "moraine_recordedBlockNumbers", hexNumber(sp.start), hexNumber(sp.end-1))
		var rpcErr *rpc.Error
		switch {
		case err == nil:
			if numbers, err = parseNumbers(raw, sp); err == nil {
				listed = true
				return nil
			}
			f.logger.Error("the replay source's block listing is invalid; probing each number instead", "err", err)
			f.noListing.Store(true)
		case errors.As(err, &rpcErr) && rpcErr.Code == -32601: // method not found
			f.logger.Info("the replay source cannot list its blocks; probing each number", "err", err)
			f.noListing.Store(true)
		default:
			f.countRetry(ctx, "rpc_error", 1)
			return err
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, ctx.Err()
	case listed:
		return numbers, nil
	}
	return f.probe(ctx, sp)
}

// parseNumbers reads a listing of hex quantities and checks that it is
// ascending and within sp.
func parseNumbers(raw json.RawMessage, sp span) ([]uint64, error) {
	var hexes []string
	if err := json.Unmarshal(raw, &hexes); err != nil {
		return nil, fmt.Errorf("not an array of hex numbers: %w", err)
	}
	out := make([]uint64, 0, len(hexes))
	for _, h := range hexes {
		n, err := strconv.ParseUint(strings.TrimPrefix(h, "0x"), 16, 64)
		switch {
		case err != nil || !strings.HasPrefix(h, "0x"):
			return nil, fmt.Errorf("%q is not a hex quantity", h)
		case n < sp.start || n >= sp.end:
			return nil, fmt.Errorf("block %d is outside [%d, %d)", n, sp.start, sp.end)
		case len(out) > 0 && n <= out[len(out)-1]:
			return nil, fmt.Errorf("block %d after block %d", n, out[len(out)-1])
		}
		out = append(out, n)
	}
	return out, nil
}

// probe returns the numbers of sp for which the node has a block, with one
// batch of cheap header calls.
func (f *Follower) probe(ctx context.Context, sp span) ([]uint64, error) {
	reqs := make([]*rpc.Request, 0, sp.len())
	for n := sp.start; n < sp.end; n++ {
		reqs = append(reqs, &rpc.Request{Method: "eth_getBlockByNumber", Params: []any{hexNumber(n), false}})
	}
	var out []uint64
	err := f.retry(100*time.Millisecond, 5*time.Second, "probing blocks failed, retrying", sp.start).Do(ctx, func() error {
		err := f.deps.RPC.Batch(ctx, reqs, rpc.AtBlock(sp.end-1))
		if err == nil {
			for _, r := range reqs {
				if r.Err != nil {
					err = r.Err
					break
				}
			}
		}
		if err != nil {
			f.countRetry(ctx, "rpc_error", 1)
			return err
		}
		for i, r := range reqs {
			if !convert.IsNull(r.Result) {
				out = append(out, sp.start+uint64(i))
			}
		}
		f.deps.RPC.Release(reqs)
		return nil
	})
	if err != nil {
		return nil, ctx.Err()
	}
	return out, nil
}

// fetchBlocks fetches numbers in one JSON-RPC batch (block with
// transactions, receipts, and traces when the chain has them), converts and
// verifies them. The batch goes to a node that has reached its last block;
// at the head it is hedged on a second node. Blocks that are not ready are
// fetched again, alone, after a pause: a null block at or below the head
// means a lagging node ("not yet"), never "no block" — except in replay
// mode, where the recording may lack it. A block whose answers fail
// verification is fetched again from the other nodes; when every node's
// answer fails, the chain stops at that block (halt) and asks again every
// HaltRetry, rather than produce an incomplete block.
func (f *Follower) fetchBlocks(ctx context.Context, numbers []uint64) ([]*record.Block, error) {
	perBlock := 2
	if f.cfg.Chain.Traces {
		perBlock = 3
	}
	out := make(map[uint64]*record.Block, len(numbers))
	todo := numbers
	if len(todo) == 0 {
		return []*record.Block{}, nil
	}
	// failedBy holds, per block, the nodes whose answers failed
	// verification: they are avoided for it.
	failedBy := map[uint64]map[string]bool{}
	err := f.retry(50*time.Millisecond, 2*time.Second, "fetching blocks failed, retrying", todo[0]).Do(ctx, func() error {
		reqs := make([]*rpc.Request, 0, perBlock*len(todo))
		for _, n := range todo {
			h := hexNumber(n)
			reqs = append(reqs,
				&rpc.Request{Method: "eth_getBlockByNumber", Params: []any{h, true}},
				&rpc.Request{Method: "eth_getBlockReceipts", Params: []any{h}})
			if f.cfg.Chain.Traces {
				reqs = append(reqs, &rpc.Request{Method: "debug_traceBlockByNumber", Params: []any{h, traceParams}})
			}
		}
		last := todo[len(todo)-1]
		opts := []rpc.Option{rpc.AtBlock(last)}
		if head, ok := f.deps.RPC.Head(); ok && last+2 >= head {
			// At the head latency is what counts, and the batches are
			// small: a slow node's batch is sent to a second one too.
			opts = append(opts, rpc.Hedge())
		}
		for _, n := range todo {
			for node := range failedBy[n] {
				opts = append(opts, rpc.Avoid(node))
			}
		}
		if err := f.deps.RPC.Batch(ctx, reqs, opts...); err != nil {
			f.countRetry(ctx, "rpc_error", len(todo))
			return fmt.Errorf("from block %d: %w", todo[0], err)
		}
		var again []uint64
		var lastErr error
		for i, n := range todo {
			calls := reqs[i*perBlock : (i+1)*perBlock]
			b, reason, err := f.convertOne(n, calls)
			var vf *verifyFailure
			switch {
			case err == nil && b != nil:
				out[n] = b
				f.resume(n)
				continue
			case err == nil: // replay: not in the recording
				continue
			case errors.As(err, &vf):
				if failedBy[n] == nil {
					failedBy[n] = map[string]bool{}
				}
				failedBy[n][vf.node] = true
				f.deps.Metrics.verifyFailures.WithLabelValues(f.chain, vf.node, vf.check).Inc()
				f.logger.Warn("block answer failed verification; fetching it from another node",
					"block", n, "node", vf.node, "check", vf.check, "err", vf.err)
				if len(failedBy[n]) >= len(f.nodes) {
					f.halt(ctx, n, vf)
					delete(failedBy, n)
				}
			}
			f.deps.Metrics.retries.WithLabelValues(f.chain, reason).Inc()
			again = append(again, n)
			lastErr = err
		}
		// The blocks are converted (copied out of the answers): the next
		// batch can read into this one's memory.
		f.deps.RPC.Release(reqs)
		todo = again
		if len(again) > 0 {
			// Usual at the head: the node announced a block that the node
			// answering this call does not serve yet.
			return obs.Expected(fmt.Errorf("block %d not ready: %w", again[0], lastErr))
		}
		return nil
	})
	if err != nil {
		return nil, ctx.Err()
	}
	blocks := make([]*record.Block, 0, len(out))
	for _, n := range numbers {
		if b := out[n]; b != nil {
			blocks = append(blocks, b)
		}
	}
	return blocks, nil
}

// verifyFailure is a block's answers failing a check: which node gave them
// and which check failed.
type verifyFailure struct {
	node, check string
	err         error
}

func (v *verifyFailure) Error() string { return v.err.Error() }
func (v *verifyFailure) Unwrap() error { return v.err }

// halt stops the chain at block n: every node's answer for it failed
// verification. It says so (log, moraine_ingest_halted), then waits
// HaltRetry before the block is asked again: a node may be repaired, and
// nothing after n is produced meanwhile.
func (f *Follower) halt(ctx context.Context, n uint64, vf *verifyFailure) {
	// Several spans may stop at once: the chain is stopped at the lowest
	// such block, the one said.
	lowest := false
	for {
		cur := f.haltedAt.Load()
		if cur != 0 && cur <= n+1 {
			break
		}
		if f.haltedAt.CompareAndSwap(cur, n+1) {
			lowest = true
			break
		}
	}
	if lowest {
		f.logger.Error("every node's answer for this block fails verification: the chain is stopped here; nothing after it is produced until a node answers it completely (asked again periodically)",
			"block", n, "check", vf.check, "nodes", len(f.nodes), "err", vf.err, "retry_every", f.cfg.HaltRetry)
	}
	f.deps.Metrics.halted.WithLabelValues(f.chain).Set(1)
	obs.Sleep(ctx, f.cfg.HaltRetry)
}

// resume clears a halt at block n once n verified.
func (f *Follower) resume(n uint64) {
	if f.haltedAt.Load() == n+1 && f.haltedAt.CompareAndSwap(n+1, 0) {
		f.deps.Metrics.halted.WithLabelValues(f.chain).Set(0)
		f.logger.Info("block verified; the chain resumes", "block", n)
	}
}

// errNotFound marks a null block below the head in non-replay mode.
var errNotFound = errors.New("node answered null")

// convertOne converts and verifies one block from its calls. A nil block
// with a nil error means the replay recording lacks it. An error comes with
// the retry reason label; a failed check is a *verifyFailure.
func (f *Follower) convertOne(n uint64, calls []*rpc.Request) (*record.Block, string, error) {
	blk, rcp := calls[0], calls[1]
	if blk.Err != nil {
		return nil, "rpc_error", fmt.Errorf("eth_getBlockByNumber(%d): %w", n, blk.Err)
	}
	if convert.IsNull(blk.Result) {
		if f.cfg.Chain.Replay {
			return nil, "", nil
		}
		return nil, "not_found", fmt.Errorf("block %d: %w", n, errNotFound)
	}
	raw := convert.Raw{Block: blk.Result, Receipts: rcp.Result, RequireTraces: f.cfg.Chain.Checked(chains.CheckTraces)}
	if rcp.Err != nil {
		return nil, "rpc_error", fmt.Errorf("eth_getBlockReceipts(%d): %w", n, rcp.Err)
	}
	tracesNode := ""
	if f.cfg.Chain.Traces {
		tr := calls[2]
		tracesNode = tr.Node
		if tr.Err != nil {
			if hdr, err := convert.ParseHeader(blk.Result); err == nil && hdr.TxCount == 0 {
				// Nothing to trace; some nodes refuse to trace genesis.
				raw.Traces = json.RawMessage("[]")
			} else {
				return nil, "rpc_error", fmt.Errorf("debug_traceBlockByNumber(%d): %w", n, tr.Err)
			}
		} else {
			raw.Traces = tr.Result
		}
	}
	start := time.Now()
	b, err := convert.Block(f.chainID, raw, f.cfg.Chain.Traces)
	f.deps.Metrics.stage.WithLabelValues(f.chain, stageConvert).Observe(time.Since(start).Seconds())
	switch {
	case errors.Is(err, convert.ErrMissingTrace):
		return nil, "unverified", &verifyFailure{node: tracesNode, check: chains.CheckTraces, err: fmt.Errorf("block %d: %w", n, err)}
	case errors.Is(err, convert.ErrNotFound):
		return nil, "not_found", err
	case errors.Is(err, convert.ErrIncomplete):
		return nil, "incomplete", err
	case err != nil:
		// Malformed data does not fix itself, but skipping a block would
		// break the no-gap guarantee: retry and say so loudly.
		f.logger.Error("cannot convert block; retrying", "block", n, "err", err)
		return nil, "invalid", err
	}
	if b.Number != n {
		return nil, "invalid", fmt.Errorf("asked for block %d, node answered block %d", n, b.Number)
	}
	start = time.Now()
	err = verify.Block(f.checks, b, blk.Result)
	f.deps.Metrics.stage.WithLabelValues(f.chain, stageVerify).Observe(time.Since(start).Seconds())
	var failure *verify.Failure
	switch {
	case errors.As(err, &failure):
		// The receipts' node is to blame for their roots, the block's for
		// its transactions.
		node := rcp.Node
		if failure.Check == chains.CheckTransactionsRoot {
			node = blk.Node
		}
		return nil, "unverified", &verifyFailure{node: node, check: failure.Check, err: err}
	case err != nil:
		f.logger.Error("cannot verify block; retrying", "block", n, "err", err)
		return nil, "invalid", err
	}
	b.FetchedAtUnixMs = f.deps.Now().UnixMilli()
	return b, "", nil
}

// retry is the follower's policy for calling the node or Kafka again; block
// is where the failing work starts (0 when there is none).
func (f *Follower) retry(initial, max time.Duration, msg string, block uint64) obs.Retry {
	return obs.Retry{Initial: initial, Max: max, Log: f.logger, Msg: msg, Attrs: []any{"block", block}}
}

// countRetry counts n blocks to fetch again for reason, unless the failure
// is the shutdown.
func (f *Follower) countRetry(ctx context.Context, reason string, n int) {
	if ctx.Err() == nil {
		f.deps.Metrics.retries.WithLabelValues(f.chain, reason).Add(float64(n))
	}
}
