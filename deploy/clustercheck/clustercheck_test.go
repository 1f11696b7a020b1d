package clustercheck

import (
	"testing"
	"time"

	"github.com/moraine-data/moraine/pkg/process"
)

func TestParseExports(t *testing.T) {
	env, err := parseExports("export MORAINE_CLICKHOUSE_ADDR=127.0.0.1:19010,127.0.0.1:19020\n\nexport MORAINE_CLICKHOUSE_CLUSTER=moraine\n")
	if err != nil {
		t.Fatal(err)
	}
	if env["MORAINE_CLICKHOUSE_ADDR"] != "127.0.0.1:19010,127.0.0.1:19020" || env["MORAINE_CLICKHOUSE_CLUSTER"] != "moraine" {
		t.Errorf("parsed %v", env)
	}
	if got := process.SplitList(env["MORAINE_CLICKHOUSE_ADDR"]); len(got) != 2 || got[1] != "127.0.0.1:19020" {
		t.Errorf("SplitList: %q", got)
	}
	// Anything but export lines means the script printed something unexpected: refuse, do not guess.
	for _, bad := range []string{"MORAINE_X=1", "export MORAINE_X", "stack.sh: cannot create state dir"} {
		if _, err := parseExports(bad); err == nil {
			t.Errorf("parseExports(%q) accepted it", bad)
		}
	}
}

func TestCompareLedger(t *testing.T) {
	// #2 acknowledged but never read: lost. #4 read but never acknowledged (its ack was lost on the way):
	// allowed. #1 read twice: a duplicate.
	missing, dups := compareLedger([]uint64{0, 1, 2, 3}, map[uint64]int{0: 1, 1: 2, 3: 1, 4: 1})
	if len(missing) != 1 || missing[0] != 2 {
		t.Errorf("missing %v, want [2]", missing)
	}
	if dups != 1 {
		t.Errorf("duplicates %d, want 1", dups)
	}
	if missing, dups := compareLedger([]uint64{0, 1}, map[uint64]int{0: 1, 1: 1}); len(missing) != 0 || dups != 0 {
		t.Errorf("complete read: missing %v, duplicates %d", missing, dups)
	}
}

func TestLedgerSummary(t *testing.T) {
	t0 := time.Unix(1000, 0)
	l := &ledger{
		sentAt:  []time.Time{t0, t0.Add(time.Second), t0.Add(2 * time.Second)},
		ackedAt: []time.Time{t0.Add(100 * time.Millisecond), {}, t0.Add(9 * time.Second)},
	}
	acked, maxWait := l.summary()
	if len(acked) != 2 || acked[0] != 0 || acked[1] != 2 {
		t.Errorf("acked %v, want [0 2]", acked)
	}
	if maxWait != 7*time.Second {
		t.Errorf("longest wait %s, want 7s", maxWait)
	}
	if got := l.firstAckAfter(t0.Add(time.Second)); !got.Equal(t0.Add(9 * time.Second)) {
		t.Errorf("first ack after the kill at %s", got)
	}
	if got := l.ackedCount(); got != 2 {
		t.Errorf("acked count %d", got)
	}
}
