package webhookapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/query/internal/access/plan"
	"github.com/moraine-data/moraine/query/internal/data/storetest"
	"github.com/moraine-data/moraine/query/internal/webhooks/webhookapi/webhookapitest"
)

// replayView is the ReplayResponse of the routes.
type replayView struct {
	ReplayID          string `json:"replayId"`
	WebhookID         string `json:"webhookId"`
	ChainID           string `json:"chainId"`
	FromBlock         uint64 `json:"fromBlock"`
	ToBlock           uint64 `json:"toBlock"`
	FromTimestamp     uint64 `json:"fromTimestamp"`
	ToTimestamp       uint64 `json:"toTimestamp"`
	Status            string `json:"status"`
	NextBlock         uint64 `json:"nextBlock"`
	MessagesPerSecond uint32 `json:"messagesPerSecond"`
	CancelRequested   bool   `json:"cancelRequested"`
	Messages          struct {
		Retransmitted, Renumbered, Delivered, Failed uint64
	} `json:"messages"`
	CreatedAt uint64 `json:"createdAt"`
}

func decodeReplay(t *testing.T, r webhookapitest.Response) replayView {
	t.Helper()
	var v replayView
	require.NoError(t, json.Unmarshal(r.Body, &v), "%s", r.Body)
	return v
}

// indexChain writes blocks 100..1000 of chain 43112 (block n at
// 1,700,000,000 + 2n) and its head, as the processor would.
func indexChain(t *testing.T, env *webhookapitest.Env) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	blocks := storetest.Chain(43112, 100, 1000, 1, "a")
	require.NoError(t, storetest.InsertBlocks(ctx, env.Conn, blocks))
	require.NoError(t, storetest.SetHead(ctx, env.Conn, blocks[len(blocks)-1], 1))
}

func ts(n uint64) uint64 { return 1_700_000_000 + 2*n }

// TestReplayRoutes: a replay of a block or time range is accepted within
// what is indexed, the webhook's confirmations and the plan's bounds, each
// broken bound is a 400 saying which; one replay per webhook at a time;
// the job is listed, read and cancelled; a create with fromBlock starts
// one.
func TestReplayRoutes(t *testing.T) {
	plans, err := plan.Parse([]byte(`{"plans": {"pro": {"replayBlocks": 500, "replayMessagesPerSecond": 7}}}`))
	require.NoError(t, err)
	env := webhookapitest.Start(t, webhookapitest.Options{Plans: plans})
	indexChain(t, env)
	acc, key := env.NewAccount(t, plan.Pro)
	r := env.Do(t, "POST", "/v1/webhooks", key, createBody(addr1))
	require.Equal(t, http.StatusCreated, r.Code, "%s", r.Body)
	id := r.JSON(t)["id"].(string)
	replay := "/v1/webhooks/" + id + ":replay"

	for _, tc := range []struct {
		name string
		body any
		want []string
	}{
		{"reversed", map[string]any{"fromBlock": 300, "toBlock": 200}, []string{"the range is reversed: fromBlock 300 is after toBlock 200"}},
		{"beyond the head", map[string]any{"fromBlock": 900, "toBlock": 1001}, []string{"toBlock 1001 is beyond the head: the newest indexed block is 1000"}},
		{"starts beyond the head", map[string]any{"fromBlock": 1005}, []string{"fromBlock 1005 is beyond the head: the newest indexed block is 1000"}},
		{"before what is indexed", map[string]any{"fromBlock": 50, "toBlock": 200}, []string{"fromBlock 50 is before what is indexed: the first indexed block of chain 43112 is 100"}},
		{"too long for the plan", map[string]any{"fromBlock": 100, "toBlock": 700},
			[]string{"the range is too long for the plan: blocks 100 to 700 are 601 blocks, and the pro plan replays at most 500 blocks at a time"}},
		{"no start", map[string]any{"toBlock": 200}, []string{"fromBlock or fromTimestamp is required: where the replay starts"}},
		{"blocks and times", map[string]any{"fromBlock": 200, "toTimestamp": ts(300)},
			[]string{"give a block range (fromBlock, toBlock) or a time range (fromTimestamp, toTimestamp), not both"}},
		{"not an integer", map[string]any{"fromBlock": "200"}, []string{"fromBlock must be a non-negative integer (the first block to replay)"}},
		{"negative", map[string]any{"fromBlock": -1}, []string{"fromBlock must be a non-negative integer (the first block to replay)"}},
		{"times reversed", map[string]any{"fromTimestamp": ts(300), "toTimestamp": ts(200)},
			[]string{fmt.Sprintf("the range is reversed: fromTimestamp %d is after toTimestamp %d", ts(300), ts(200))}},
		{"time beyond the head", map[string]any{"fromTimestamp": ts(900), "toTimestamp": ts(1000) + 1},
			[]string{fmt.Sprintf("toTimestamp %d is beyond the head: the newest indexed block, 1000, is at %d", ts(1000)+1, ts(1000))}},
		{"time before what is indexed", map[string]any{"fromTimestamp": ts(99), "toTimestamp": ts(200)},
			[]string{fmt.Sprintf("fromTimestamp %d is before what is indexed: the first indexed block, 100, is at %d", ts(99), ts(100))}},
		{"not an object", "[]", []string{"Request body must be a JSON object"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := env.Do(t, "POST", replay, key, tc.body)
			if tc.name == "not an object" {
				requireError(t, r, http.StatusBadRequest, tc.want[0])
				return
			}
			requireError(t, r, http.StatusBadRequest, tc.want)
		})
	}

	// A time range: the blocks from the first at or after fromTimestamp to
	// the last at or before toTimestamp.
	r = env.Do(t, "POST", replay, key, map[string]any{"fromTimestamp": ts(200) - 1, "toTimestamp": ts(300) + 1})
	require.Equal(t, http.StatusAccepted, r.Code, "%s", r.Body)
	v := decodeReplay(t, r)
	require.Equal(t, uint64(200), v.FromBlock)
	require.Equal(t, uint64(300), v.ToBlock)
	require.Equal(t, ts(200)-1, v.FromTimestamp)
	require.Equal(t, "queued", v.Status)
	require.Equal(t, uint32(7), v.MessagesPerSecond, "the plan's pace")
	require.Equal(t, id, v.WebhookID)
	require.Equal(t, "43112", v.ChainID)
	require.Regexp(t, uuidV4, v.ReplayID)

	// One at a time.
	r = env.Do(t, "POST", replay, key, map[string]any{"fromBlock": 600})
	require.Equal(t, http.StatusConflict, r.Code, "%s", r.Body)
	requireError(t, r, http.StatusConflict, fmt.Sprintf(
		"replay %s of this webhook has not ended yet: one replay runs per webhook at a time (cancel it with POST /v1/webhooks/%s/replays/%s:cancel)",
		v.ReplayID, id, v.ReplayID))

	// Read, list, cancel.
	one := "/v1/webhooks/" + id + "/replays/" + v.ReplayID
	r = env.Do(t, "GET", one, key, nil)
	require.Equal(t, http.StatusOK, r.Code, "%s", r.Body)
	require.Equal(t, v.ReplayID, decodeReplay(t, r).ReplayID)
	r = env.Do(t, "POST", one+":cancel", key, nil)
	require.Equal(t, http.StatusOK, r.Code, "%s", r.Body)
	require.True(t, decodeReplay(t, r).CancelRequested)
	// The runner reports it cancelled: it has ended, and another may start.
	require.NoError(t, env.DB.PutReplayProgress(context.Background(), accountdb.ReplayProgress{WebhookID: id, ID: v.ReplayID,
		Status: accountdb.ReplayCancelled, NextBlock: 250, Retransmitted: 3, Renumbered: 4}))
	r = env.Do(t, "GET", one, key, nil)
	got := decodeReplay(t, r)
	require.Equal(t, "cancelled", got.Status)
	require.Equal(t, uint64(250), got.NextBlock)
	require.Equal(t, uint64(4), got.Messages.Renumbered)
	requireError(t, env.Do(t, "POST", one+":cancel", key, nil), http.StatusBadRequest,
		[]string{fmt.Sprintf("replay %s has already ended (cancelled)", v.ReplayID)})
	r = env.Do(t, "POST", replay, key, map[string]any{"fromBlock": 600})
	require.Equal(t, http.StatusAccepted, r.Code, "%s", r.Body)
	second := decodeReplay(t, r)
	require.Equal(t, uint64(1000), second.ToBlock, "to the head by default")
	r = env.Do(t, "GET", "/v1/webhooks/"+id+"/replays", key, nil)
	require.Equal(t, http.StatusOK, r.Code, "%s", r.Body)
	var list struct{ Replays []replayView }
	require.NoError(t, json.Unmarshal(r.Body, &list))
	require.Len(t, list.Replays, 2)
	require.Equal(t, second.ReplayID, list.Replays[0].ReplayID, "newest first")

	// Not found: another's webhook, an unknown replay, a malformed id.
	_, other := env.NewAccount(t, plan.Pro)
	requireError(t, env.Do(t, "GET", one, other, nil), http.StatusNotFound, "Webhook not found")
	requireError(t, env.Do(t, "POST", replay, other, map[string]any{"fromBlock": 600}), http.StatusNotFound, "Webhook not found")
	requireError(t, env.Do(t, "GET", "/v1/webhooks/"+id+"/replays/0b1c2d3e-0000-4000-8000-000000000000", key, nil), http.StatusNotFound, "Replay not found")
	requireError(t, env.Do(t, "GET", "/v1/webhooks/"+id+"/replays/nope", key, nil), http.StatusNotFound, "Replay not found")

	// Confirmations shorten the head; an inactive webhook is refused.
	body := createBody(addr2)
	body["confirmations"] = 8
	r = env.Do(t, "POST", "/v1/webhooks", key, body)
	require.Equal(t, http.StatusCreated, r.Code, "%s", r.Body)
	confirmed := r.JSON(t)["id"].(string)
	requireError(t, env.Do(t, "POST", "/v1/webhooks/"+confirmed+":replay", key, map[string]any{"fromBlock": 900, "toBlock": 995}),
		http.StatusBadRequest, []string{"toBlock 995 is beyond the head: the newest indexed block is 1000, less the webhook's 8 confirmations 992"})
	require.Equal(t, http.StatusOK, env.Do(t, "DELETE", "/v1/webhooks/"+confirmed, key, nil).Code)
	requireError(t, env.Do(t, "POST", "/v1/webhooks/"+confirmed+":replay", key, map[string]any{"fromBlock": 900}),
		http.StatusBadRequest, []string{"the webhook is inactive: reactivate it (PATCH /v1/webhooks/{id} with status active) before replaying to it"})

	// fromBlock on create: the webhook starts with a replay to the head.
	body = createBody(addrN(7))
	body["fromBlock"] = 900
	r = env.Do(t, "POST", "/v1/webhooks", key, body)
	require.Equal(t, http.StatusCreated, r.Code, "%s", r.Body)
	created := r.JSON(t)
	rid, _ := created["replayId"].(string)
	require.Regexp(t, uuidV4, rid)
	r = env.Do(t, "GET", "/v1/webhooks/"+created["id"].(string)+"/replays/"+rid, key, nil)
	require.Equal(t, http.StatusOK, r.Code, "%s", r.Body)
	job := decodeReplay(t, r)
	require.Equal(t, uint64(900), job.FromBlock)
	require.Equal(t, uint64(1000), job.ToBlock)
	// The webhook as read later has no replayId.
	require.NotContains(t, env.Do(t, "GET", "/v1/webhooks/"+created["id"].(string), key, nil).JSON(t), "replayId")
	// A fromBlock out of bounds creates nothing.
	before := len(env.Do(t, "GET", "/v1/webhooks", key, nil).JSON(t)["webhooks"].([]any))
	body = createBody(addrN(8))
	body["fromBlock"] = 10
	requireError(t, env.Do(t, "POST", "/v1/webhooks", key, body), http.StatusBadRequest,
		[]string{"fromBlock 10 is before what is indexed: the first indexed block of chain 43112 is 100"})
	require.Len(t, env.Do(t, "GET", "/v1/webhooks", key, nil).JSON(t)["webhooks"].([]any), before)
	_ = acc
}
