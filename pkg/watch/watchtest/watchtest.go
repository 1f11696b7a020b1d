// Package watchtest reads the address-watch topic and the webhook tables of
// the real local services (pkg/testenv) for tests: the last record of every
// key, what ClickHouse says the topic must hold, and how the two differ.
package watchtest

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/watch"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

// Entry is the last record of one address-watch key.
type Entry struct {
	Version uint64
	// Value is nil for a tombstone.
	Value *record.WatchEntry
}

// TopicState reads the address-watch topic from the start to its current
// end and returns the last record of every key.
func TopicState(t testing.TB, k kafkautil.Config) map[string]Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic := k.Topic(topics.AddressWatch)
	cl, err := kgo.NewClient(append(k.BaseOpts(slog.New(slog.DiscardHandler), "watchtest"),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	left := map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	out := map[string]Entry{}
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading %s: %v", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			var v uint64
			for _, h := range r.Headers {
				if h.Key == codec.VersionHeader {
					v, _ = codec.ParseVersion(h.Value)
				}
			}
			ent := Entry{Version: v}
			if r.Value != nil {
				d, err := codec.DecodeWatchEntry(r.Value)
				if err != nil {
					t.Fatalf("key %s: %v", r.Key, err)
				}
				ent.Value = d
			}
			out[string(r.Key)] = ent
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
		})
	}
	return out
}

// Live returns the keys of state whose last record is not a tombstone.
func Live(state map[string]Entry) map[string]Entry {
	out := map[string]Entry{}
	for k, e := range state {
		if e.Value != nil {
			out[k] = e
		}
	}
	return out
}

// ClickHouseState is what the topic must hold according to ClickHouse: the
// version of every key that must be live (accounts, webhooks, addresses not
// removed, of webhooks that exist).
func ClickHouseState(t testing.TB, db *accountdb.DB) map[string]uint64 {
	t.Helper()
	ctx := context.Background()
	out := map[string]uint64{}
	accs, err := db.Accounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	secs, err := db.AllSecrets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	secOf := map[string]accountdb.Secret{}
	for _, s := range secs {
		secOf[s.AccountID] = s
	}
	for _, a := range accs {
		out[codec.WatchAccountKey(a.ID)] = watch.AccountVersion(a, secOf[a.ID])
	}
	ws, err := db.AllWebhooks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, w := range ws {
		known[w.ID] = true
		out[codec.WatchWebhookKey(w.ID)] = w.Version
	}
	err = db.AllAddresses(ctx, func(a accountdb.Address) error {
		if known[a.WebhookID] && !a.Removed {
			out[codec.WatchAddressKey(a.WebhookID, a.Address)] = a.Version
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Disagreement describes how the topic differs from ClickHouse ("" when
// they agree): keys missing or stale on the topic, and live keys ClickHouse
// does not back (phantoms).
func Disagreement(t testing.TB, db *accountdb.DB, k kafkautil.Config) string {
	t.Helper()
	want := ClickHouseState(t, db)
	got := Live(TopicState(t, k))
	var diffs []string
	for key, v := range want {
		e, ok := got[key]
		switch {
		case !ok:
			diffs = append(diffs, "missing "+key)
		case e.Version != v || e.Value.GetVersion() != v:
			diffs = append(diffs, "stale "+key)
		}
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			diffs = append(diffs, "phantom "+key)
		}
	}
	if len(diffs) > 10 {
		diffs = append(diffs[:10], "...")
	}
	return strings.Join(diffs, "; ")
}

// WaitAgree waits until the topic agrees with ClickHouse.
func WaitAgree(t testing.TB, db *accountdb.DB, k kafkautil.Config, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		d := Disagreement(t, db, k)
		if d == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic and clickhouse disagree after %s: %s", timeout, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
