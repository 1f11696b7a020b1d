package e2e

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// gateReceiver is a webhook endpoint that can be down: while down it
// answers 503 and keeps nothing; up, it keeps every request, as a receiver
// does that stores what it accepted.
type gateReceiver struct {
	mu   sync.Mutex
	down bool
	got  []delivered
	srv  *httptest.Server
}

func newGateReceiver(t testing.TB) *gateReceiver {
	r := &gateReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		down := r.down
		if !down {
			r.got = append(r.got, delivered{path: req.URL.Path, body: body, hdr: req.Header.Clone(), at: time.Now()})
		}
		r.mu.Unlock()
		if down {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *gateReceiver) setDown(down bool) {
	r.mu.Lock()
	r.down = down
	r.mu.Unlock()
}

func (r *gateReceiver) snapshot(path string) []delivered {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []delivered
	for _, d := range r.got {
		if d.path == path {
			out = append(out, d)
		}
	}
	return out
}

// replayJob is the ReplayResponse of the API.
type replayJob struct {
	ReplayID  string `json:"replayId"`
	FromBlock uint64 `json:"fromBlock"`
	ToBlock   uint64 `json:"toBlock"`
	Status    string `json:"status"`
	NextBlock uint64 `json:"nextBlock"`
	Error     string `json:"error"`
	Messages  struct {
		Retransmitted, Renumbered, Delivered, Failed uint64
	} `json:"messages"`
}

// TestWebhookReplayDevchain runs the development chain with the whole
// pipeline and delivery's retry window shortened to well under a second,
// and checks replays from outside, through the API and a receiver:
//
//   - a receiver that is down for longer than the retry window loses
//     messages (its webhook is even deactivated, and sees nothing while it
//     is); after it is back and the webhook reactivated, one replay of the
//     chain's history makes its view whole: the sequence has no gap, and
//     applying it in order gives exactly the canonical chain's activity;
//   - every replayed message that repeats one delivered live (a reorg's
//     retractions included) has the live message's sequence, messageId
//     and body, byte for byte, and carries moraine-replay;
//   - a webhook created with fromBlock 1 receives the chain's activity
//     from block 1, numbered 1, 2, 3, ... with no gap;
//   - ranges out of bounds get a 400 that says which bound.
func TestWebhookReplayDevchain(t *testing.T) {
	rpcAddr := freeAddr(t)
	start(t, "devchain", "--rpc.listen-address", rpcAddr, "--block.interval", "250ms", "--traffic.tx-per-block", "8")
	rpcURL := "http://" + rpcAddr
	eventually(t, 60*time.Second, "devchain RPC", func() bool {
		_, err := rpcCall(rpcURL, "eth_blockNumber")
		return err == nil
	})
	var accounts []string
	raw, err := rpcCall(rpcURL, "moraine_accounts")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &accounts); err != nil || len(accounts) < 3 {
		t.Fatalf("moraine_accounts: %v %s", err, raw)
	}
	watched := accounts[:2]
	head := func() uint64 {
		raw, err := rpcCall(rpcURL, "eth_blockNumber")
		if err != nil {
			t.Fatal(err)
		}
		var h string
		_ = json.Unmarshal(raw, &h)
		return hexToBig(h).Uint64()
	}

	recv := newGateReceiver(t)
	var key, secret string
	s := startServices(t, fmt.Sprintf(`{"evmChainId":"43112","name":"Development chain","network":"devnet",
		"rpcUrls":["%s"],"wsUrl":"ws://%s","networkToken":{"name":"Avalanche","symbol":"AVAX","decimals":18},
		"traces":true,"webhooks":true,"startBlock":0}`, rpcURL, rpcAddr), pipelineOpts{
		delivery: true,
		// Three attempts within about half a second: a receiver down for
		// seconds is down for longer than the retry window.
		deliveryArgs: []string{"--delivery.retry-schedule", "200ms,200ms"},
		beforeIngest: func(s *stackUp) {
			out, err := exec.Command(filepath.Join(binaries(t), "moraine-admin"), "dev-key", "--plan", "pro",
				"--out", filepath.Join(t.TempDir(), "key"), "--clickhouse.addr", s.ch.Addr, "--clickhouse.database", s.ch.Database).Output()
			if err != nil {
				t.Fatalf("moraine-admin dev-key: %v", err)
			}
			key = strings.TrimSpace(string(out))
			var sec struct {
				Secret string `json:"secret"`
			}
			if code := call(t, "POST", s.api+"/v1/webhooks:generateOrRotateSharedSecret", key, nil, &sec); code != http.StatusCreated {
				t.Fatalf("generate secret: %d", code)
			}
			secret = sec.Secret
		}})
	hmacKey, err := hex.DecodeString(secret)
	if err != nil {
		t.Fatal(err)
	}
	create := func(path string, fromBlock *uint64) (id, replayID string) {
		body := map[string]any{"url": recv.srv.URL + path, "chainId": "43112", "eventType": "address_activity",
			"metadata": map[string]any{"addresses": watched}}
		if fromBlock != nil {
			body["fromBlock"] = *fromBlock
		}
		var w struct {
			ID       string `json:"id"`
			ReplayID string `json:"replayId"`
		}
		if code := call(t, "POST", s.api+"/v1/webhooks", key, body, &w); code != http.StatusCreated {
			t.Fatalf("create webhook %s: %d", path, code)
		}
		return w.ID, w.ReplayID
	}
	hook, _ := create("/w", nil)

	// Live, then a reorg whose retractions are delivered live too.
	eventually(t, 60*time.Second, "block 40", func() bool { return head() >= 40 })
	if _, err := rpcCall(rpcURL, "moraine_reorg", 3); err != nil {
		t.Fatalf("moraine_reorg: %v", err)
	}
	eventually(t, 60*time.Second, "block 60", func() bool { return head() >= 60 })
	eventually(t, 60*time.Second, "live messages and a retraction", func() bool {
		retractions := 0
		for _, m := range recv.snapshot("/w") {
			if m.hdr.Get("moraine-message-kind") == "retraction" {
				retractions++
			}
		}
		return len(recv.snapshot("/w")) >= 20 && retractions > 0
	})

	// Down for longer than the retry window: messages fail every attempt
	// and the webhook is deactivated; blocks go by meanwhile.
	recv.setDown(true)
	downAt := head()
	eventually(t, 60*time.Second, "the webhook deactivated by its failures", func() bool {
		var w struct {
			Status string `json:"status"`
		}
		call(t, "GET", s.api+"/v1/webhooks/"+hook, key, nil, &w)
		return w.Status == "inactive"
	})
	eventually(t, 60*time.Second, "30 blocks while it is down", func() bool { return head() >= downAt+30 })
	recv.setDown(false)
	if code := call(t, "PATCH", s.api+"/v1/webhooks/"+hook, key, map[string]any{"status": "active"}, nil); code != http.StatusOK {
		t.Fatalf("reactivate: %d", code)
	}
	eventually(t, 60*time.Second, "20 more blocks", func() bool { return head() >= downAt+50 })

	// Out of bounds: a 400 that says which bound.
	var idx struct {
		Blocks []struct {
			BlockNumber string `json:"blockNumber"`
		} `json:"blocks"`
	}
	call(t, "GET", s.api+"/v1/chains/43112/blocks?pageSize=1", "", nil, &idx)
	indexed, _ := strconv.ParseUint(idx.Blocks[0].BlockNumber, 10, 64)
	for body, want := range map[string]string{
		`{"fromBlock": 30, "toBlock": 20}`:                           "the range is reversed: fromBlock 30 is after toBlock 20",
		fmt.Sprintf(`{"fromBlock": 1, "toBlock": %d}`, indexed+1000): fmt.Sprintf("toBlock %d is beyond the head", indexed+1000),
	} {
		req, _ := http.NewRequest("POST", s.api+"/v1/webhooks/"+hook+":replay", strings.NewReader(body))
		req.Header.Set("x-glacier-api-key", key)
		req.Header.Set("content-type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(b, []byte(want)) {
			t.Errorf("replay %s: %d %s, want a 400 saying %q", body, resp.StatusCode, b, want)
		}
	}

	// One replay of the whole history, and a webhook that starts at block 1.
	var job replayJob
	if code := call(t, "POST", s.api+"/v1/webhooks/"+hook+":replay", key, map[string]any{"fromBlock": 1}, &job); code != http.StatusAccepted {
		t.Fatalf("replay: %d", code)
	}
	one := uint64(1)
	backfilled, backfill := create("/f", &one)
	if backfill == "" {
		t.Fatal("a create with fromBlock answered no replayId")
	}
	waitDone := func(webhook, id string) replayJob {
		var j replayJob
		eventually(t, 3*time.Minute, "replay "+id+" done", func() bool {
			call(t, "GET", s.api+"/v1/webhooks/"+webhook+"/replays/"+id, key, nil, &j)
			if j.Status == "failed" {
				t.Fatalf("replay %s failed: %s", id, j.Error)
			}
			return j.Status == "done"
		})
		return j
	}
	job = waitDone(hook, job.ReplayID)
	fjob := waitDone(backfilled, backfill)
	t.Logf("replay of /w: blocks %d-%d, %d retransmitted, %d renumbered; /f (fromBlock 1): blocks %d-%d, %d renumbered",
		job.FromBlock, job.ToBlock, job.Messages.Retransmitted, job.Messages.Renumbered, fjob.FromBlock, fjob.ToBlock, fjob.Messages.Renumbered)
	if job.Messages.Retransmitted == 0 || job.Messages.Renumbered == 0 {
		t.Errorf("the replay repeated %d messages and numbered %d anew: the test exercised too little", job.Messages.Retransmitted, job.Messages.Renumbered)
	}

	// The expected activity: the canonical chain, from the node.
	final := head()
	eventually(t, 60*time.Second, "the chain past the last replay", func() bool { return head() >= final+8 })
	final = head()
	ledger := rpcTxs(t, rpcURL, 1, final)
	set := map[string]bool{}
	for _, a := range watched {
		set[lower(a)] = true
	}
	want := map[string]bool{}
	for hash, g := range ledger {
		if g.matches(set, false, nil) {
			want[hash] = true
		}
	}
	views := func(path string) []streamMsg {
		var out []streamMsg
		for _, m := range recv.snapshot(path) {
			out = append(out, readStreamMsg(t, delivered{path: m.path, body: m.body, hdr: m.hdr, at: m.at}, hmacKey))
		}
		return out
	}
	check := func(path string) (missing, extra int) {
		msgs := views(path)
		kept, _ := newStreamView(t, msgs).final()
		for h := range want {
			if _, ok := kept[h]; !ok {
				missing++
			}
		}
		for h := range kept {
			if !want[h] {
				// Only activity of blocks past final may still arrive.
				var n uint64
				for _, m := range msgs {
					if m.txHash == h {
						n = m.block
					}
				}
				if n <= final {
					extra++
				}
			}
		}
		return missing, extra
	}
	eventually(t, 2*time.Minute, "each receiver's view equal to the canonical chain's activity", func() bool {
		m1, x1 := check("/w")
		m2, x2 := check("/f")
		return m1+x1+m2+x2 == 0
	})
	for _, path := range []string{"/w", "/f"} {
		view := newStreamView(t, views(path))
		kept, retractions := view.final()
		t.Logf("%s: %d deliveries, %d numbered messages, %d retractions, %d transactions kept (%d expected up to block %d)",
			path, len(recv.snapshot(path)), len(view.bySeq), retractions, len(kept), len(want), final)
		if g := view.gaps(); len(g) > 0 {
			t.Errorf("%s: sequence gaps %v", path, g)
		}
	}

	// Replay equals live: every sequence delivered both ways is the same
	// message, byte for byte.
	live, replayed := map[uint64]delivered{}, map[uint64]delivered{}
	for _, m := range recv.snapshot("/w") {
		seq, _ := strconv.ParseUint(m.hdr.Get("moraine-sequence"), 10, 64)
		if id := m.hdr.Get("moraine-replay"); id != "" {
			if id != job.ReplayID {
				t.Errorf("seq %d: moraine-replay %q, want %s", seq, id, job.ReplayID)
			}
			replayed[seq] = m
		} else {
			live[seq] = m
		}
	}
	both := 0
	for seq, r := range replayed {
		l, ok := live[seq]
		if !ok {
			continue
		}
		both++
		if !bytes.Equal(l.body, r.body) || l.hdr.Get("webhook-id") != r.hdr.Get("webhook-id") ||
			l.hdr.Get("moraine-message-kind") != r.hdr.Get("moraine-message-kind") {
			t.Errorf("sequence %d: live and replayed differ:\n live   %s %s\n replay %s %s", seq, l.hdr.Get("webhook-id"), l.body,
				r.hdr.Get("webhook-id"), r.body)
		}
	}
	t.Logf("/w: %d sequences delivered live and replayed, all identical; %d replayed only (lost or never carried)", both, len(replayed)-both)
	if both == 0 {
		t.Error("no replayed message repeats a live one")
	}
	for _, m := range recv.snapshot("/f") {
		if m.hdr.Get("moraine-replay") == "" {
			continue
		}
		if m.hdr.Get("moraine-replay") != backfill {
			t.Errorf("/f: moraine-replay %q, want %s", m.hdr.Get("moraine-replay"), backfill)
		}
	}
}
