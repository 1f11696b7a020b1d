package webhookapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/query/internal/access/auth"
	"github.com/moraine-data/moraine/query/internal/access/plan"
	"github.com/moraine-data/moraine/query/internal/server/apierr"
)

// Replays (a moraine extension, docs/webhook-stream.md "Replay"): the API
// writes a job (accountdb.ReplayJob); the processor that matches the
// webhook's chain runs it (processor/internal/replay) and reports its
// progress, which the API reads back with the job's deliveries.

// IndexedRange is what of a chain ClickHouse holds.
type IndexedRange struct {
	First, Head                   uint64
	FirstTimestamp, HeadTimestamp uint64
}

// Indexed tells what of a chain is indexed; the data store implements it
// (through internal/app).
type Indexed interface {
	// IndexedRange is the chain's lowest and head block (false: none yet).
	IndexedRange(ctx context.Context, chainID uint64) (IndexedRange, bool, error)
	// BlockAtTime is the first block at or after unix seconds ts (after),
	// or the last at or before it (false: none).
	BlockAtTime(ctx context.Context, chainID, ts uint64, after bool) (uint64, bool, error)
}

// maxListedReplays is how many of a webhook's replays the list shows
// (newest first).
const maxListedReplays = 50

// replayRequest is a validated ReplayWebhookRequest: a block range or a
// time range; nil bounds are absent.
type replayRequest struct {
	FromBlock, ToBlock         *uint64
	FromTimestamp, ToTimestamp *uint64
}

// uint64Field reads a non-negative integer field.
func (f *fields) uint64Field(name, meaning string) (*uint64, bool) {
	r, ok := f.raw(name)
	if !ok {
		return nil, false
	}
	var n uint64
	if err := json.Unmarshal(r, &n); err != nil {
		f.fail("%s%s must be a non-negative integer (%s)", f.pre, name, meaning)
		return nil, false
	}
	return &n, true
}

func parseReplay(body []byte) (replayRequest, error) {
	f, err := decodeObject(body)
	if err != nil {
		return replayRequest{}, err
	}
	var r replayRequest
	r.FromBlock, _ = f.uint64Field("fromBlock", "the first block to replay")
	r.ToBlock, _ = f.uint64Field("toBlock", "the last block to replay")
	r.FromTimestamp, _ = f.uint64Field("fromTimestamp", "Unix seconds: the replay starts at the first block at or after it")
	r.ToTimestamp, _ = f.uint64Field("toTimestamp", "Unix seconds: the replay ends at the last block at or before it")
	blocks, times := r.FromBlock != nil || r.ToBlock != nil, r.FromTimestamp != nil || r.ToTimestamp != nil
	switch {
	case len(f.errs) > 0:
	case blocks && times:
		f.fail("give a block range (fromBlock, toBlock) or a time range (fromTimestamp, toTimestamp), not both")
	case r.FromBlock == nil && r.FromTimestamp == nil:
		f.fail("fromBlock or fromTimestamp is required: where the replay starts")
	}
	return r, f.err()
}

// replayResponse is a replay job with its progress (ReplayResponse in
// /api-json).
type replayResponse struct {
	ReplayID      string `json:"replayId"`
	WebhookID     string `json:"webhookId"`
	ChainID       string `json:"chainId"`
	FromBlock     uint64 `json:"fromBlock"`
	ToBlock       uint64 `json:"toBlock"`
	FromTimestamp uint64 `json:"fromTimestamp,omitempty"`
	ToTimestamp   uint64 `json:"toTimestamp,omitempty"`
	Status        string `json:"status"`
	// NextBlock is the progress: every block before it is replayed.
	NextBlock         uint64         `json:"nextBlock"`
	Messages          replayMessages `json:"messages"`
	MessagesPerSecond uint32         `json:"messagesPerSecond"`
	CancelRequested   bool           `json:"cancelRequested"`
	Error             string         `json:"error,omitempty"`
	CreatedAt         uint64         `json:"createdAt"`
	StartedAt         uint64         `json:"startedAt,omitempty"`
	UpdatedAt         uint64         `json:"updatedAt,omitempty"`
}

type replayMessages struct {
	Retransmitted uint64 `json:"retransmitted"`
	Renumbered    uint64 `json:"renumbered"`
	Delivered     uint64 `json:"delivered"`
	Failed        uint64 `json:"failed"`
}

type listReplaysResponse struct {
	Replays []replayResponse `json:"replays"`
}

func toReplayResponse(j accountdb.ReplayJob, p accountdb.ReplayProgress, d accountdb.ReplayDeliveries) replayResponse {
	r := replayResponse{
		ReplayID: j.ID, WebhookID: j.WebhookID, ChainID: strconv.FormatUint(j.ChainID, 10), FromBlock: j.FromBlock, ToBlock: j.ToBlock,
		FromTimestamp: j.FromTimestamp, ToTimestamp: j.ToTimestamp, Status: accountdb.ReplayQueued, NextBlock: j.FromBlock,
		MessagesPerSecond: j.MessagesPerSecond, CancelRequested: j.CancelRequestedAt > 0, CreatedAt: j.CreatedAt,
		Messages: replayMessages{Delivered: d.Delivered, Failed: d.Failed},
	}
	if p.ID != "" {
		r.Status, r.NextBlock, r.Error, r.StartedAt, r.UpdatedAt = p.Status, max(p.NextBlock, j.FromBlock), p.Error, p.StartedAt, p.UpdatedAt
		r.ToBlock = max(r.ToBlock, p.ToBlock)
		r.Messages.Retransmitted, r.Messages.Renumbered = p.Retransmitted, p.Renumbered
	}
	return r
}

// replayRange turns a request into the blocks to replay for a webhook of
// chain with confirmations, or a 400 saying what is wrong with it.
func (s *service) replayRange(ctx context.Context, chain uint64, confirmations uint32, pl plan.Plan, r replayRequest) (from, to uint64, err error) {
	idx, ok, err := s.indexed.IndexedRange(ctx, chain)
	if err != nil {
		return 0, 0, apierr.Unavailable("Indexed blocks are temporarily unavailable", err)
	}
	if !ok {
		return 0, 0, apierr.Validation(fmt.Sprintf("chain %d has no indexed block yet: there is nothing to replay", chain))
	}
	if idx.Head < uint64(confirmations) {
		return 0, 0, apierr.Validation(fmt.Sprintf("chain %d has %d indexed blocks, fewer than the webhook's %d confirmations: there is nothing to replay yet",
			chain, idx.Head+1, confirmations))
	}
	confirmed := idx.Head - uint64(confirmations)
	var msgs []string
	if r.FromTimestamp != nil || r.ToTimestamp != nil {
		to = confirmed
		if r.ToTimestamp != nil {
			if *r.ToTimestamp > idx.HeadTimestamp {
				msgs = append(msgs, fmt.Sprintf("toTimestamp %d is beyond the head: the newest indexed block, %d, is at %d", *r.ToTimestamp, idx.Head, idx.HeadTimestamp))
			} else if to, ok, err = s.indexed.BlockAtTime(ctx, chain, *r.ToTimestamp, false); err != nil {
				return 0, 0, apierr.Unavailable("Indexed blocks are temporarily unavailable", err)
			} else if !ok {
				msgs = append(msgs, fmt.Sprintf("toTimestamp %d is before what is indexed: the first indexed block, %d, is at %d", *r.ToTimestamp, idx.First, idx.FirstTimestamp))
			}
		}
		switch {
		case r.FromTimestamp == nil:
		case *r.FromTimestamp < idx.FirstTimestamp:
			msgs = append(msgs, fmt.Sprintf("fromTimestamp %d is before what is indexed: the first indexed block, %d, is at %d", *r.FromTimestamp, idx.First, idx.FirstTimestamp))
		case r.ToTimestamp != nil && *r.FromTimestamp > *r.ToTimestamp:
			msgs = append(msgs, fmt.Sprintf("the range is reversed: fromTimestamp %d is after toTimestamp %d", *r.FromTimestamp, *r.ToTimestamp))
		case *r.FromTimestamp > idx.HeadTimestamp:
			msgs = append(msgs, fmt.Sprintf("fromTimestamp %d is beyond the head: the newest indexed block, %d, is at %d", *r.FromTimestamp, idx.Head, idx.HeadTimestamp))
		default:
			if from, ok, err = s.indexed.BlockAtTime(ctx, chain, *r.FromTimestamp, true); err != nil {
				return 0, 0, apierr.Unavailable("Indexed blocks are temporarily unavailable", err)
			} else if !ok {
				msgs = append(msgs, fmt.Sprintf("fromTimestamp %d is beyond the head: no indexed block is at or after it", *r.FromTimestamp))
			}
		}
		if len(msgs) == 0 && from > to {
			msgs = append(msgs, fmt.Sprintf("no indexed block lies between fromTimestamp %d and toTimestamp %d", *r.FromTimestamp, *r.ToTimestamp))
		}
		if len(msgs) == 0 && to > confirmed {
			msgs = append(msgs, fmt.Sprintf("toTimestamp %d is beyond the head: its block, %d, is above the newest indexed block %d less the webhook's %d confirmations",
				*r.ToTimestamp, to, idx.Head, confirmations))
		}
	} else {
		from, to = *r.FromBlock, confirmed
		if r.ToBlock != nil {
			to = *r.ToBlock
		}
		switch {
		case from > to && (r.ToBlock != nil):
			msgs = append(msgs, fmt.Sprintf("the range is reversed: fromBlock %d is after toBlock %d", from, to))
		case from < idx.First:
			msgs = append(msgs, fmt.Sprintf("fromBlock %d is before what is indexed: the first indexed block of chain %d is %d", from, chain, idx.First))
		}
		if to > confirmed || from > confirmed {
			what, n := "toBlock", to
			if r.ToBlock == nil || from > confirmed {
				what, n = "fromBlock", from
			}
			if confirmations > 0 {
				msgs = append(msgs, fmt.Sprintf("%s %d is beyond the head: the newest indexed block is %d, less the webhook's %d confirmations %d",
					what, n, idx.Head, confirmations, confirmed))
			} else {
				msgs = append(msgs, fmt.Sprintf("%s %d is beyond the head: the newest indexed block is %d", what, n, idx.Head))
			}
		}
	}
	if len(msgs) == 0 && to-from+1 > pl.ReplayBlocks {
		msgs = append(msgs, fmt.Sprintf("the range is too long for the plan: blocks %d to %d are %d blocks, and the %s plan replays at most %d blocks at a time",
			from, to, to-from+1, pl.Name, pl.ReplayBlocks))
	}
	if len(msgs) > 0 {
		return 0, 0, apierr.Validation(msgs...)
	}
	return from, to, nil
}

// view of one job, with its progress and deliveries.
func (s *service) replayView(ctx context.Context, j accountdb.ReplayJob, p accountdb.ReplayProgress) (replayResponse, error) {
	d, err := s.store.ReplayDeliveryCounts(ctx, j.WebhookID, j.ID, j.CreatedAt)
	if err != nil {
		return replayResponse{}, storeErr(err, "")
	}
	return toReplayResponse(j, p, d), nil
}

// newReplayJob is the job of a request already validated.
func (s *service) newReplayJob(p auth.Principal, w accountdb.Webhook, chain uint64, from, to uint64, r replayRequest) (accountdb.ReplayJob, error) {
	id, err := uuid.NewRandom()
	if err != nil {
		return accountdb.ReplayJob{}, apierr.Internal(err)
	}
	j := accountdb.ReplayJob{
		WebhookID: w.ID, ID: id.String(), AccountID: p.Account.ID, ChainID: chain, FromBlock: from, ToBlock: to,
		MessagesPerSecond: s.plans.GetOrFree(p.Account.Plan).ReplayMessagesPerSecond,
		CreatedAt:         uint64(s.now().UnixMilli()), Version: s.clock.Next(0),
	}
	if r.FromTimestamp != nil {
		j.FromTimestamp = *r.FromTimestamp
	}
	if r.ToTimestamp != nil {
		j.ToTimestamp = *r.ToTimestamp
	}
	return j, nil
}

// startReplay creates a replay of one of the account's webhooks.
func (s *service) startReplay(ctx context.Context, p auth.Principal, webhookID string, r replayRequest) (replayResponse, error) {
	unlock := s.locks.Webhook(webhookID)
	defer unlock()
	w, err := s.store.Webhook(ctx, p.Account.ID, webhookID)
	if err != nil {
		return replayResponse{}, storeErr(err, msgWebhookNotFound)
	}
	if w.Status != accountdb.StatusActive {
		return replayResponse{}, apierr.Validation("the webhook is inactive: reactivate it (PATCH /v1/webhooks/{id} with status active) before replaying to it")
	}
	chain, err := strconv.ParseUint(w.ChainID, 10, 64)
	if err != nil {
		return replayResponse{}, apierr.Internal(fmt.Errorf("webhook %s: chain %q", w.ID, w.ChainID))
	}
	from, to, err := s.replayRange(ctx, chain, w.Confirmations, s.plans.GetOrFree(p.Account.Plan), r)
	if err != nil {
		return replayResponse{}, err
	}
	// One replay per webhook at a time (the processor would queue a second
	// one behind the first anyway).
	jobs, err := s.store.ReplayJobs(ctx, webhookID, maxListedReplays)
	if err != nil {
		return replayResponse{}, storeErr(err, "")
	}
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	progress, err := s.store.ReplayProgressOf(ctx, webhookID, ids)
	if err != nil {
		return replayResponse{}, storeErr(err, "")
	}
	for _, j := range jobs {
		if !accountdb.ReplayFinished(progress[j.ID].Status) {
			return replayResponse{}, apierr.New(http.StatusConflict, fmt.Sprintf(
				"replay %s of this webhook has not ended yet: one replay runs per webhook at a time (cancel it with POST /v1/webhooks/%s/replays/%s:cancel)",
				j.ID, webhookID, j.ID))
		}
	}
	j, err := s.newReplayJob(p, w, chain, from, to, r)
	if err != nil {
		return replayResponse{}, err
	}
	if err := s.store.PutReplayJob(ctx, j); err != nil {
		return replayResponse{}, storeErr(err, "")
	}
	s.metrics.replays.Inc()
	return toReplayResponse(j, accountdb.ReplayProgress{}, accountdb.ReplayDeliveries{}), nil
}

// replayOf reads one of the webhook's replays (404 for another account's
// webhook, as for every webhook route).
func (s *service) replayOf(ctx context.Context, p auth.Principal, webhookID, replayID string) (accountdb.ReplayJob, accountdb.ReplayProgress, error) {
	if _, err := s.store.Webhook(ctx, p.Account.ID, webhookID); err != nil {
		return accountdb.ReplayJob{}, accountdb.ReplayProgress{}, storeErr(err, msgWebhookNotFound)
	}
	if _, err := uuid.Parse(replayID); err != nil {
		return accountdb.ReplayJob{}, accountdb.ReplayProgress{}, apierr.NotFound(msgReplayNotFound)
	}
	j, err := s.store.ReplayJob(ctx, webhookID, replayID)
	if err != nil {
		return accountdb.ReplayJob{}, accountdb.ReplayProgress{}, storeErr(err, msgReplayNotFound)
	}
	ps, err := s.store.ReplayProgressOf(ctx, webhookID, []string{replayID})
	if err != nil {
		return accountdb.ReplayJob{}, accountdb.ReplayProgress{}, storeErr(err, "")
	}
	return j, ps[replayID], nil
}

const msgReplayNotFound = "Replay not found"

func (s *service) getReplay(ctx context.Context, p auth.Principal, webhookID, replayID string) (replayResponse, error) {
	j, pr, err := s.replayOf(ctx, p, webhookID, replayID)
	if err != nil {
		return replayResponse{}, err
	}
	return s.replayView(ctx, j, pr)
}

func (s *service) listReplays(ctx context.Context, p auth.Principal, webhookID string) ([]replayResponse, error) {
	if _, err := s.store.Webhook(ctx, p.Account.ID, webhookID); err != nil {
		return nil, storeErr(err, msgWebhookNotFound)
	}
	jobs, err := s.store.ReplayJobs(ctx, webhookID, maxListedReplays)
	if err != nil {
		return nil, storeErr(err, "")
	}
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	progress, err := s.store.ReplayProgressOf(ctx, webhookID, ids)
	if err != nil {
		return nil, storeErr(err, "")
	}
	out := make([]replayResponse, 0, len(jobs))
	for _, j := range jobs {
		v, err := s.replayView(ctx, j, progress[j.ID])
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// cancelReplay asks the replay's runner to stop after the chunk it is on
// (every message of a committed chunk is delivered: its numbers are taken).
func (s *service) cancelReplay(ctx context.Context, p auth.Principal, webhookID, replayID string) (replayResponse, error) {
	unlock := s.locks.Webhook(webhookID)
	defer unlock()
	j, pr, err := s.replayOf(ctx, p, webhookID, replayID)
	if err != nil {
		return replayResponse{}, err
	}
	if accountdb.ReplayFinished(pr.Status) {
		return replayResponse{}, apierr.Validation(fmt.Sprintf("replay %s has already ended (%s)", replayID, pr.Status))
	}
	if j.CancelRequestedAt == 0 {
		j.CancelRequestedAt = uint64(s.now().UnixMilli())
		j.Version = s.clock.Next(j.Version)
		if err := s.store.PutReplayJob(ctx, j); err != nil {
			return replayResponse{}, storeErr(err, "")
		}
	}
	return s.replayView(ctx, j, pr)
}

// fromBlockJob is the replay a create with fromBlock starts: from there to
// the confirmed head, with the new webhook's settings (a 400 when the
// block is not replayable).
func (s *service) fromBlockJob(ctx context.Context, p auth.Principal, w accountdb.Webhook, fromBlock uint64) (accountdb.ReplayJob, error) {
	chain, err := strconv.ParseUint(w.ChainID, 10, 64)
	if err != nil {
		return accountdb.ReplayJob{}, apierr.Internal(fmt.Errorf("webhook %s: chain %q", w.ID, w.ChainID))
	}
	r := replayRequest{FromBlock: &fromBlock}
	from, to, err := s.replayRange(ctx, chain, w.Confirmations, s.plans.GetOrFree(p.Account.Plan), r)
	if err != nil {
		return accountdb.ReplayJob{}, err
	}
	j, err := s.newReplayJob(p, w, chain, from, to, r)
	// The webhook's live stream begins at the first block the matcher
	// matches once it knows the webhook: the replay must reach there, and
	// the processor knows where that is when it starts the job.
	j.ToLive = true
	return j, err
}

func (h *handlers) startReplay(c *gin.Context) {
	req, err := parseBody(h, c, parseReplay)
	if err != nil {
		apierr.Write(c, err)
		return
	}
	v, err := h.svc.startReplay(c.Request.Context(), principal(c), c.Param("id"), req)
	if err != nil {
		apierr.Write(c, err)
		return
	}
	c.JSON(http.StatusAccepted, v)
}

func (h *handlers) listReplays(c *gin.Context) {
	vs, err := h.svc.listReplays(c.Request.Context(), principal(c), c.Param("id"))
	if err != nil {
		apierr.Write(c, err)
		return
	}
	c.JSON(http.StatusOK, listReplaysResponse{Replays: vs})
}

func (h *handlers) getReplay(c *gin.Context) {
	v, err := h.svc.getReplay(c.Request.Context(), principal(c), c.Param("id"), c.Param("replayId"))
	if err != nil {
		apierr.Write(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}

func (h *handlers) cancelReplay(c *gin.Context) {
	v, err := h.svc.cancelReplay(c.Request.Context(), principal(c), c.Param("id"), c.Param("replayId"))
	if err != nil {
		apierr.Write(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}
