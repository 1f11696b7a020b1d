package replay

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/tokenmeta"
	"github.com/moraine-data/moraine/pkg/watch"
	"github.com/moraine-data/moraine/processor/internal/ledger"
	"github.com/moraine-data/moraine/processor/internal/stream"
	"github.com/moraine-data/moraine/processor/internal/watchlist"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

// Matcher is what the runner needs of the matcher (*matcher.Consumer):
// the webhook-stream state it numbers in, and what payloads are built with.
type Matcher interface {
	Streams() *stream.State
	CatchUpStreams(ctx context.Context) error
	// GroupMember is the matcher's membership in its group now (ok false
	// while it has none): every replay transaction is fenced with it.
	GroupMember() (member kafkautil.GroupMember, ok bool)
	Native(chain uint64) *chains.Token
	Tokens() *tokenmeta.Resolver
}

// Deps are the runner's collaborators.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Kafka      kafkautil.Config
	// Conn reads the indexed tables and the ledger; Accounts the jobs, the
	// webhooks and their addresses.
	Conn     driver.Conn
	Accounts *accountdb.DB
	Matcher  Matcher
	// Producers are the fenced replay producers (also the matcher's
	// Partitions).
	Producers *Producers
	// MatcherGroup and SinkGroup are the consumer groups (with the topic
	// prefix) whose offsets say how far the matcher and ClickHouse are.
	MatcherGroup, SinkGroup string
	// RetractionWindow is the matcher's (--matcher.retraction-window):
	// blocks that recent may still be orphaned.
	RetractionWindow uint64
	// LedgerTimeout bounds a ledger read.
	LedgerTimeout time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Runner runs the replay jobs of the chains this instance matches.
type Runner struct {
	cfg    Config
	d      Deps
	logger *slog.Logger
	src    *source
	m      *metrics
}

// New validates and allocates; no I/O.
func New(cfg Config, d Deps) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Logger == nil || d.Registerer == nil || d.Conn == nil || d.Accounts == nil || d.Matcher == nil || d.Producers == nil {
		return nil, errors.New("replay: Deps.Logger, Registerer, Conn, Accounts, Matcher and Producers are required")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Runner{cfg: cfg, d: d, logger: d.Logger.With("component", "replay"), src: &source{conn: d.Conn, timeout: cfg.Timeout},
		m: newMetrics(d.Registerer)}, nil
}

// Run looks for jobs every PollInterval and runs, up to Concurrency at a
// time, the oldest unfinished job of each webhook whose chain this
// instance matches, until ctx ends. A job that stopped on an error starts
// again after a wait that doubles with each failure in a row (from
// PollInterval to maxRetryWait): while Kafka or ClickHouse is unreachable
// it would otherwise start and fail again at once, over and over.
func (r *Runner) Run(ctx context.Context) error {
	defer r.d.Producers.closeAll()
	cl, err := kafkautil.NewClient(ctx, r.logger, r.d.Kafka.BaseOpts(r.logger, "moraine-replay-admin")...)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	blocks := r.d.Kafka.Topic(topics.Blocks)
	var nparts int
	again := obs.Retry{Initial: 500 * time.Millisecond, Max: 10 * time.Second, Log: r.logger, Msg: "blocks topic metadata unavailable, retrying"}
	if err := again.Do(ctx, func() error {
		md, err := adm.Metadata(ctx, blocks)
		if err != nil {
			return err
		}
		if td, ok := md.Topics[blocks]; ok && td.Err == nil && len(td.Partitions) > 0 {
			nparts = len(td.Partitions)
			return nil
		}
		return fmt.Errorf("topic %s not found", blocks)
	}); err != nil {
		return nil // ctx ended
	}
	env := &jobEnv{r: r, adm: adm, blocks: blocks, nparts: nparts}

	running := map[string]context.CancelFunc{}
	type ended struct {
		id     string
		failed bool
	}
	finished := make(chan ended)
	retries := newRetryWaits(r.cfg.PollInterval, maxRetryWait)
	defer func() {
		for _, cancel := range running {
			cancel()
		}
		for range running {
			<-finished
		}
	}()
	t := time.NewTicker(r.cfg.PollInterval)
	defer t.Stop()
	for {
		r.m.running.Set(float64(len(running)))
		jobs, err := r.d.Accounts.UnfinishedReplays(ctx)
		if err != nil && ctx.Err() == nil {
			r.logger.Warn("reading replay jobs failed; trying again", "err", err)
		}
		if err == nil {
			retries.keepOnly(func(id string) bool {
				_, ok := running[id]
				return ok || slices.ContainsFunc(jobs, func(j accountdb.ReplayJob) bool { return j.ID == id })
			})
		}
		busy := map[string]bool{} // webhooks with an older unfinished job
		for _, j := range jobs {
			if busy[j.WebhookID] {
				continue
			}
			busy[j.WebhookID] = true
			if _, ok := running[j.ID]; ok || len(running) >= r.cfg.Concurrency || !retries.mayStart(j.ID, r.d.Now()) {
				continue
			}
			p := chainPartition(blocks, j.ChainID, nparts)
			if _, ok := r.d.Producers.of(p); !ok {
				continue // another instance matches the chain
			}
			jctx, cancel := context.WithCancel(ctx)
			running[j.ID] = cancel
			wait := retries.started(j.ID)
			go func() {
				err := env.run(jctx, j, p)
				failed := err != nil && jctx.Err() == nil
				if failed {
					r.logger.Warn("replay stopped; it resumes from its last chunk", "replay_id", j.ID, "webhook_id", j.WebhookID,
						"retry_in", wait, "err", err)
				}
				finished <- ended{j.ID, failed}
			}()
		}
		select {
		case <-ctx.Done():
			return nil
		case e := <-finished:
			running[e.id]()
			delete(running, e.id)
			retries.ended(e.id, e.failed, r.d.Now())
		case <-t.C:
		}
	}
}

// maxRetryWait bounds the wait before a failed job starts again.
const maxRetryWait = 30 * time.Second

// retryWaits say when a job that failed may start again: after
// obs.Backoff's wait for its failures in a row, from least up to most.
type retryWaits struct {
	least, most time.Duration
	jobs        map[string]retryWait
}

type retryWait struct {
	at       time.Time     // the job may not start before
	failures int           // failed runs in a row
	wait     time.Duration // the wait after the current run, if it fails
}

func newRetryWaits(least, most time.Duration) *retryWaits {
	return &retryWaits{least: least, most: most, jobs: map[string]retryWait{}}
}

func (w *retryWaits) mayStart(id string, now time.Time) bool { return !now.Before(w.jobs[id].at) }

// started records that the job starts and returns the wait that follows
// if this run fails.
func (w *retryWaits) started(id string) time.Duration {
	rw := w.jobs[id]
	rw.wait = obs.Backoff(rw.failures, w.least, w.most)
	w.jobs[id] = rw
	return rw.wait
}

// ended records how the job's run ended: a failure holds it back, a run
// that ended well forgets its failures.
func (w *retryWaits) ended(id string, failed bool, now time.Time) {
	if !failed {
		delete(w.jobs, id)
		return
	}
	rw := w.jobs[id]
	rw.at, rw.failures = now.Add(rw.wait), rw.failures+1
	w.jobs[id] = rw
}

// keepOnly forgets the jobs that live does not name (ended, here or
// elsewhere).
func (w *retryWaits) keepOnly(live func(id string) bool) {
	for id := range w.jobs {
		if !live(id) {
			delete(w.jobs, id)
		}
	}
}

// jobEnv is what every job of a Run shares.
type jobEnv struct {
	r      *Runner
	adm    *kadm.Client
	blocks string
	nparts int
}

// errFailed marks an error that ends a job for good (reported failed).
type errFailed struct{ msg string }

func (e errFailed) Error() string { return e.msg }

// run runs one job from its last committed chunk to its end. An error
// leaves the job to be run again (from its committed progress) at the next
// poll, unless it is an errFailed.
func (e *jobEnv) run(ctx context.Context, job accountdb.ReplayJob, p int32) error {
	r := e.r
	log := r.logger.With("replay_id", job.ID, "webhook_id", job.WebhookID, "chain_id", job.ChainID)
	if err := r.d.Matcher.CatchUpStreams(ctx); err != nil {
		return fmt.Errorf("webhook-stream state: %w", err)
	}
	prog := &record.ReplayProgress{ReplayId: job.ID, WebhookId: job.WebhookID, ChainId: job.ChainID, NextBlock: job.FromBlock}
	if got := r.d.Matcher.Streams().Replay(job.ID); got != nil {
		prog = cloneProgress(got)
	}
	started := uint64(r.d.Now().UnixMilli())
	report := func(status, errText string) {
		rp := accountdb.ReplayProgress{WebhookID: job.WebhookID, ID: job.ID, Status: status, ToBlock: prog.GetToBlock(), NextBlock: prog.GetNextBlock(),
			Retransmitted: prog.GetRetransmitted(), Renumbered: prog.GetRenumbered(), Error: errText, StartedAt: started,
			UpdatedAt: uint64(r.d.Now().UnixMilli())}
		if err := r.d.Accounts.PutReplayProgress(context.WithoutCancel(ctx), rp); err != nil {
			log.Warn("replay progress not recorded", "err", err)
		}
		if accountdb.ReplayFinished(status) {
			r.m.finished.WithLabelValues(status).Inc()
			log.Info("replay finished", "status", status, "next_block", prog.GetNextBlock(), "retransmitted", prog.GetRetransmitted(),
				"renumbered", prog.GetRenumbered(), "error", errText)
		}
	}
	if prog.GetDone() {
		// Ended before, its report lost.
		status := accountdb.ReplayDone
		if job.CancelRequestedAt > 0 {
			status = accountdb.ReplayCancelled
		}
		report(status, "")
		return nil
	}
	fail := func(err error) error {
		var f errFailed
		if errors.As(err, &f) {
			report(accountdb.ReplayFailed, f.msg)
			return nil
		}
		return err
	}
	report(accountdb.ReplayWaiting, "")
	hook, err := e.webhook(ctx, job)
	if err != nil {
		return fail(err)
	}
	if err := e.lastBlock(ctx, &job, prog, p); err != nil {
		return fail(err)
	}
	if err := e.barrier(ctx, job, p, hook.settings.Confirmations); err != nil {
		return fail(err)
	}
	log.Info("replay running", "from_block", prog.GetNextBlock(), "to_block", job.ToBlock)
	report(accountdb.ReplayRunning, "")
	refreshed := r.d.Now()
	pace := newPacer(job.MessagesPerSecond, r.d.Now())
	window := newReadWindow(r.cfg.ChunkBlocks)
	for prog.GetNextBlock() <= job.ToBlock {
		if ctx.Err() != nil {
			return nil
		}
		cur, err := r.d.Accounts.ReplayJob(ctx, job.WebhookID, job.ID)
		if err != nil {
			return err
		}
		if cur.CancelRequestedAt > 0 {
			if err := e.finish(ctx, prog, p); err != nil {
				return err
			}
			report(accountdb.ReplayCancelled, "")
			return nil
		}
		if r.d.Now().Sub(refreshed) > 30*time.Second {
			// The addresses and filters of now, as they change.
			if hook, err = e.webhook(ctx, job); err != nil {
				return fail(err)
			}
			refreshed = r.d.Now()
		}
		from := prog.GetNextBlock()
		maxTo := min(job.ToBlock, from+window.blocks-1)
		n, err := e.chunk(ctx, job, prog, hook, p, maxTo, pace.budget(r.d.Now(), r.cfg.ChunkMessages))
		if err != nil {
			return fail(err)
		}
		window.chunked(prog.GetNextBlock()-from, prog.GetNextBlock() <= maxTo)
		report(accountdb.ReplayRunning, "")
		if !obs.Sleep(ctx, pace.produced(n, r.d.Now())) {
			return nil
		}
	}
	if err := e.finish(ctx, prog, p); err != nil {
		return err
	}
	report(accountdb.ReplayDone, "")
	return nil
}

// lastBlock settles the job's last block (prog.ToBlock, job.ToBlock). A
// job that runs to where the webhook's live stream began (fromBlock on
// create) goes up to the newest block ClickHouse holds once it holds
// every block the matcher committed: the matcher matched every block
// after those with the webhook in its table (it was created before the
// job started), and none before them, so nothing falls between the
// replay and the live stream (a block both cover is in the ledger, and
// repeated, not numbered twice). With confirmations, the barrier then
// waits until those blocks are confirmed.
func (e *jobEnv) lastBlock(ctx context.Context, job *accountdb.ReplayJob, prog *record.ReplayProgress, p int32) error {
	switch {
	case prog.GetToBlock() > 0:
		// Settled by an earlier run.
	case job.ToLive:
		if err := e.clickHouseCaughtUp(ctx, p); err != nil {
			return err
		}
		head, _, err := e.r.src.head(ctx, job.ChainID)
		if err != nil {
			return err
		}
		prog.ToBlock = max(job.ToBlock, head)
	default:
		prog.ToBlock = job.ToBlock
	}
	job.ToBlock = prog.GetToBlock()
	return nil
}

// webhook reads the webhook's settings and addresses of now into a watch
// table of its own, for the matcher's rules.
func (e *jobEnv) webhook(ctx context.Context, job accountdb.ReplayJob) (webhookNow, error) {
	r := e.r
	w, err := r.d.Accounts.Webhook(ctx, job.AccountID, job.WebhookID)
	if errors.Is(err, accountdb.ErrNotFound) {
		if r.d.Now().Sub(time.UnixMilli(int64(job.CreatedAt))) > time.Minute {
			return webhookNow{}, errFailed{"the webhook does not exist"}
		}
		return webhookNow{}, fmt.Errorf("webhook %s not found yet", job.WebhookID)
	}
	if err != nil {
		return webhookNow{}, err
	}
	if w.Status != accountdb.StatusActive {
		return webhookNow{}, errFailed{"the webhook is inactive: its messages would not be delivered"}
	}
	addrs, err := r.d.Accounts.AddressesOf(ctx, []string{job.WebhookID}, 1<<30)
	if err != nil {
		return webhookNow{}, err
	}
	table := watchlist.New(watchlist.Deps{})
	rec, err := watch.WebhookRecord(w)
	if err != nil {
		return webhookNow{}, errFailed{err.Error()}
	}
	table.ApplyRecord(rec)
	out := webhookNow{table: table}
	for _, given := range addrs[job.WebhookID] {
		raw, err := hex.DecodeString(strings.TrimPrefix(strings.ToLower(given), "0x"))
		a, ok := evm.AddressFrom(raw)
		if err != nil || !ok {
			continue // the API accepts only 0x + 40 hex
		}
		rec, err := watch.AddressRecord(accountdb.Address{WebhookID: job.WebhookID, Address: a.Hex(), Given: given, Version: w.Version}, w.ChainID)
		if err != nil {
			return webhookNow{}, err
		}
		table.ApplyRecord(rec)
		out.addrs = append(out.addrs, a)
	}
	if out.settings = table.Webhook(job.WebhookID); out.settings == nil {
		return webhookNow{}, errFailed{"the webhook's settings cannot be read"}
	}
	return out, nil
}

// barrier waits until the matcher has committed every block of the job's
// range (up to ToBlock plus the webhook's confirmations, so that nothing
// of the range still waits to be released) and the ledger holds every
// message the webhook's stream committed so far: only then does the
// ledger say which of the range's messages the stream carried.
func (e *jobEnv) barrier(ctx context.Context, job accountdb.ReplayJob, p int32, confirmations uint32) error {
	r := e.r
	deadline := r.d.Now().Add(r.cfg.BarrierTimeout)
	target := job.ToBlock + uint64(confirmations)
	for {
		ok, err := e.matcherPassed(ctx, job.ChainID, target, p)
		if err != nil {
			r.logger.Warn("replay barrier: matcher position unknown, retrying", "replay_id", job.ID, "err", err)
		}
		if ok {
			break
		}
		if r.d.Now().After(deadline) {
			return errFailed{fmt.Sprintf("the matcher did not pass block %d within %s", target, r.cfg.BarrierTimeout)}
		}
		if !obs.Sleep(ctx, 500*time.Millisecond) {
			return ctx.Err()
		}
	}
	if err := r.d.Matcher.CatchUpStreams(ctx); err != nil {
		return fmt.Errorf("webhook-stream state: %w", err)
	}
	last := r.d.Matcher.Streams().Sequence(job.WebhookID)
	for {
		ok, err := ledger.Complete(ctx, r.d.Conn, r.d.LedgerTimeout, job.WebhookID, last)
		if err != nil {
			r.logger.Warn("replay barrier: ledger position unknown, retrying", "replay_id", job.ID, "err", err)
		}
		if ok {
			return nil
		}
		if r.d.Now().After(deadline) {
			return errFailed{fmt.Sprintf("the message ledger did not catch up within %s", r.cfg.BarrierTimeout)}
		}
		if !obs.Sleep(ctx, 500*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// matcherPassed reports whether the matcher group committed past block n
// of chain (the block's record's offset, from the sink's version).
func (e *jobEnv) matcherPassed(ctx context.Context, chain, n uint64, p int32) (bool, error) {
	v, ok, err := e.r.src.blockVersion(ctx, chain, n)
	if err != nil || !ok {
		return false, err
	}
	at, err := e.committed(ctx, e.r.d.MatcherGroup, p)
	return at > int64(v), err
}

// committed is group's committed offset of blocks partition p (-1: none).
func (e *jobEnv) committed(ctx context.Context, group string, p int32) (int64, error) {
	offs, err := e.adm.FetchOffsetsForTopics(ctx, group, e.blocks)
	if err != nil {
		return -1, err
	}
	o, ok := offs.Lookup(e.blocks, p)
	if !ok || o.Err != nil {
		return -1, nil
	}
	return o.At, nil
}

// clickHouseCaughtUp waits until ClickHouse holds everything the matcher
// committed on partition p (the sink's committed offset at least the
// matcher's): then every reorg the matcher handled is in the blocks the
// replay reads.
func (e *jobEnv) clickHouseCaughtUp(ctx context.Context, p int32) error {
	deadline := e.r.d.Now().Add(e.r.cfg.BarrierTimeout)
	for {
		m, err := e.committed(ctx, e.r.d.MatcherGroup, p)
		if err == nil {
			var s int64
			if s, err = e.committed(ctx, e.r.d.SinkGroup, p); err == nil && s >= m {
				return nil
			}
		}
		if e.r.d.Now().After(deadline) {
			return errFailed{fmt.Sprintf("ClickHouse did not catch up with the matcher within %s", e.r.cfg.BarrierTimeout)}
		}
		if !obs.Sleep(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// errReorged: a reorg of the chain committed while the chunk was derived.
var errReorged = errors.New("replay: the chain reorganized while the chunk was read")

// chunk derives and commits the next chunk of the job, of blocks up to
// maxTo and at most maxMsgs messages (whole blocks), advancing prog; it
// returns the messages produced.
func (e *jobEnv) chunk(ctx context.Context, job accountdb.ReplayJob, prog *record.ReplayProgress, hook webhookNow, p int32,
	maxTo uint64, maxMsgs int) (int, error) {
	r := e.r
	for {
		head, _, err := r.src.head(ctx, job.ChainID)
		if err != nil {
			return 0, err
		}
		recentFrom := uint64(0)
		if head+1 > r.d.RetractionWindow {
			recentFrom = head + 1 - r.d.RetractionWindow
		}
		// Blocks that may still be orphaned are read only once ClickHouse
		// holds every reorg the matcher handled; a reorg committed while
		// they are read makes the chunk read again.
		guard := maxTo >= recentFrom
		streams := r.d.Matcher.Streams()
		reorgs := streams.Reorgs(job.ChainID)
		if guard {
			if err := e.clickHouseCaughtUp(ctx, p); err != nil {
				return 0, err
			}
		}
		dStart := r.d.Now()
		entries, err := ledger.Range(ctx, r.d.Conn, r.d.LedgerTimeout, job.WebhookID, prog.GetNextBlock(), maxTo)
		if err != nil {
			return 0, err
		}
		ch, err := derive(ctx, r.src, r.d.Matcher.Tokens(), r.d.Matcher.Native(job.ChainID), deriveInput{
			job:  jobSpec{id: job.ID, webhookID: job.WebhookID, accountID: job.AccountID, chain: job.ChainID},
			from: prog.GetNextBlock(), maxTo: maxTo, maxMsgs: maxMsgs, hook: hook, entries: entries, now: r.d.Now().UnixMilli(),
		})
		if err != nil {
			return 0, err
		}
		r.m.stage.WithLabelValues("derive").Observe(r.d.Now().Sub(dStart).Seconds())
		if ch.missing > 0 {
			r.m.missing.Add(float64(ch.missing))
			r.logger.Warn("ledger messages whose transactions the indexed tables lack were not repeated", "replay_id", job.ID,
				"from_block", ch.from, "to_block", ch.to, "missing", ch.missing)
		}
		cStart := r.d.Now()
		err = e.commit(ctx, prog, ch, false, p, func(n uint64) bool { return n >= recentFrom }, func() bool {
			return guard && streams.Reorgs(job.ChainID) != reorgs
		})
		if errors.Is(err, errReorged) {
			r.m.rederived.Inc()
			continue
		}
		if err != nil {
			return 0, err
		}
		r.m.stage.WithLabelValues("commit").Observe(r.d.Now().Sub(cStart).Seconds())
		r.m.messages.WithLabelValues("retransmitted").Add(float64(len(ch.retransmitted)))
		r.m.messages.WithLabelValues("renumbered").Add(float64(len(ch.fresh)))
		return len(ch.retransmitted) + len(ch.fresh), nil
	}
}

// commit produces the chunk and its progress in one transaction of the
// partition's producer: the repeated messages first (they need no
// number), then, holding the stream's numbering lock, the new messages
// with their numbers, the sequences and the progress.
//
// With final, the chunk is empty and the progress is marked done.
func (e *jobEnv) commit(ctx context.Context, prog *record.ReplayProgress, ch chunk, final bool, p int32, recent func(uint64) bool, reorged func() bool) error {
	r := e.r
	pr, ok := r.d.Producers.of(p)
	if !ok {
		return errNotOwner
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if err := pr.ready(ctx, p); err != nil {
		return fmt.Errorf("replay producer of partition %d: %w", p, err)
	}
	cl := pr.cl.Load()
	tctx, cancel := context.WithTimeout(ctx, r.cfg.TransactionTimeout)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		return fmt.Errorf("replay: begin transaction: %w", err)
	}
	abort := func(err error) error {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = cl.AbortBufferedRecords(actx)
		if aerr := cl.EndTransaction(actx, kgo.TryAbort); aerr != nil {
			if rerr := pr.reset(ctx, p); rerr != nil {
				return errors.Join(err, rerr)
			}
		}
		return err
	}
	replayTopic := r.d.Kafka.Topic(topics.Replay)
	produce := func(recs []*kgo.Record) error {
		promise := kgo.AbortingFirstErrPromise(cl)
		for _, rec := range recs {
			cl.Produce(tctx, rec, promise.Promise())
		}
		return promise.Err()
	}
	var first []*kgo.Record
	for _, a := range ch.retransmitted {
		v, err := codec.EncodeActivity(a)
		if err != nil {
			return abort(err)
		}
		first = append(first, &kgo.Record{Topic: replayTopic, Key: []byte(a.GetWebhookId()), Value: v,
			Headers: []kgo.RecordHeader{{Key: codec.SchemaHeader, Value: []byte(codec.ActivitySchema)}}})
	}
	if err := produce(first); err != nil {
		return abort(fmt.Errorf("replay: produce: %w", err))
	}
	streams := r.d.Matcher.Streams()
	sb := streams.Begin(r.d.Now().UnixMilli())
	sb.Hold()
	// The state is read while the lock is held: a transaction that ended
	// in doubt before (the matcher's or a replay's) is settled by then, and
	// nobody numbers between the read and this chunk's numbers.
	cctx, ccancel := context.WithTimeout(ctx, r.cfg.TransactionTimeout)
	err := r.d.Matcher.CatchUpStreams(cctx)
	ccancel()
	if err != nil {
		streams.Abort(sb)
		return abort(fmt.Errorf("webhook-stream state: %w", err))
	}
	streams.Settled(sb)
	if reorged() {
		streams.Abort(sb)
		return abort(errReorged)
	}
	sb.Replayed(ch.fresh, recent)
	next := cloneProgress(prog)
	if final {
		next.Done = true
	} else {
		next.NextBlock = ch.to + 1
	}
	next.Retransmitted += uint64(len(ch.retransmitted))
	next.Renumbered += uint64(len(ch.fresh))
	next.Chunks++
	sb.SetReplay(next)
	recs, err := sb.Records(replayTopic, r.d.Kafka.Topic(topics.WebhookStreams))
	if err == nil {
		err = produce(recs)
	}
	if err != nil {
		streams.Abort(sb)
		return abort(fmt.Errorf("replay: produce: %w", err))
	}
	// The transaction commits only while this instance is a member of the
	// matcher group's generation in which it owns the partition (doc.go,
	// "Membership"): the membership is read before the ownership is
	// checked, so a partition revoked in between is seen.
	member, ok := r.d.Matcher.GroupMember()
	if cur, owned := r.d.Producers.of(p); !ok || !owned || cur != pr {
		streams.Abort(sb)
		return abort(errNotOwner)
	}
	if err := kafkautil.FenceByGroup(tctx, cl, pr.txnID, member, r.d.Kafka.Topic(topics.ReplayFence)); err != nil {
		streams.Abort(sb)
		return abort(fmt.Errorf("replay: %w", err))
	}
	if err := cl.EndTransaction(tctx, kgo.TryCommit); err != nil {
		// Committed or not, nobody knows: settle it (a new client under
		// the same id) before anyone numbers again, then read the stream
		// state, which holds the transaction if it committed.
		rerr := pr.reset(ctx, p)
		if rerr == nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.TransactionTimeout)
			rerr = r.d.Matcher.CatchUpStreams(cctx)
			cancel()
		}
		if rerr != nil {
			// Still unknown: whoever numbers next settles it first.
			streams.AbortInDoubt(sb)
		} else {
			streams.Abort(sb)
		}
		return errors.Join(fmt.Errorf("replay: commit: %w", err), rerr)
	}
	streams.Commit(sb)
	prog.NextBlock, prog.Retransmitted, prog.Renumbered, prog.Chunks, prog.Done = next.NextBlock, next.Retransmitted, next.Renumbered, next.Chunks, next.Done
	prog.ToBlock = next.ToBlock
	return nil
}

// finish commits the job's end (its progress with done set), so that no
// runner starts it again even if its final report is lost.
func (e *jobEnv) finish(ctx context.Context, prog *record.ReplayProgress, p int32) error {
	return e.commit(ctx, prog, chunk{}, true, p, func(uint64) bool { return false }, func() bool { return false })
}

func cloneProgress(p *record.ReplayProgress) *record.ReplayProgress {
	return &record.ReplayProgress{ReplayId: p.GetReplayId(), WebhookId: p.GetWebhookId(), ChainId: p.GetChainId(),
		NextBlock: p.GetNextBlock(), Retransmitted: p.GetRetransmitted(), Renumbered: p.GetRenumbered(), Chunks: p.GetChunks(),
		Done: p.GetDone(), ToBlock: p.GetToBlock()}
}
