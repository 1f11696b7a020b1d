package lease

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/testenv"
)

const (
	leaseTopic = "leases"
	partitions = 8
	session    = 600 * time.Millisecond
)

var chainIDs = []string{"1", "43112", "43113", "43114", "43419", "4337"}

// ledger records which instance runs which chain and fails the test if a
// chain ever runs twice at once.
type ledger struct {
	t       *testing.T
	mu      sync.Mutex
	running map[string]string // chain -> instance
	starts  map[string]int
}

func newLedger(t *testing.T) *ledger {
	return &ledger{t: t, running: map[string]string{}, starts: map[string]int{}}
}

// runner returns the RunChain of instance name: it holds the chain until
// its context ends.
func (l *ledger) runner(name string) RunChain {
	return func(ctx context.Context, chain string) error {
		l.mu.Lock()
		if other, ok := l.running[chain]; ok {
			l.t.Errorf("chain %s started on %s while %s runs it", chain, name, other)
		}
		l.running[chain] = name
		l.starts[chain]++
		l.mu.Unlock()
		<-ctx.Done()
		l.mu.Lock()
		delete(l.running, chain)
		l.mu.Unlock()
		return nil
	}
}

// owners returns chain -> instance now.
func (l *ledger) owners() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]string, len(l.running))
	for c, n := range l.running {
		out[c] = n
	}
	return out
}

func (l *ledger) waitAll(t *testing.T, within time.Duration, ok func(map[string]string) bool) map[string]string {
	t.Helper()
	var got map[string]string
	require.Eventually(t, func() bool {
		got = l.owners()
		return len(got) == len(chainIDs) && ok(got)
	}, within, 10*time.Millisecond, "chains running: %v", l.owners())
	return got
}

func newCluster(t *testing.T) []string {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, leaseTopic),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

type instance struct {
	m      *Manager
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

func startInstance(t *testing.T, addrs []string, run RunChain, extra ...kgo.Opt) *instance {
	t.Helper()
	logger := testenv.Logger(t)
	opts := append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.WithLogger(nil)}, extra...)
	m, err := New(Config{Topic: leaseTopic, Group: "ingest", SessionTimeout: session, HeartbeatInterval: 100 * time.Millisecond,
		StopTimeout: 5 * time.Second}, Deps{Logger: logger, KafkaOpts: opts}, chainIDs, partitions, run)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{m: m, cancel: cancel, done: make(chan error, 1)}
	go func() { in.done <- m.Run(ctx) }()
	t.Cleanup(in.stop)
	return in
}

// stop cancels the instance and waits for Run; it returns Run's error.
func (in *instance) stop() {
	in.once.Do(func() {
		in.cancel()
		in.err = <-in.done
	})
}

// TestChainsSpreadAndMoveOnStop: two instances share the chains, each runs
// once; when one stops, the other takes its chains over at once (it left
// the group), and no chain ever runs on both.
func TestChainsSpreadAndMoveOnStop(t *testing.T) {
	addrs := newCluster(t)
	l := newLedger(t)
	a := startInstance(t, addrs, l.runner("a"))
	l.waitAll(t, 10*time.Second, func(map[string]string) bool { return true })
	startInstance(t, addrs, l.runner("b"))
	// The balancer spreads the lease partitions; whether a given chain moves
	// depends on the hash, so wait for b to hold at least one partition's
	// chains or for a stable split.
	got := l.waitAll(t, 10*time.Second, func(o map[string]string) bool {
		for _, n := range o {
			if n == "b" {
				return true
			}
		}
		return false
	})
	t.Logf("split: %v", got)

	stopped := time.Now()
	a.stop()
	l.waitAll(t, 5*time.Second, func(o map[string]string) bool {
		for _, n := range o {
			if n != "b" {
				return false
			}
		}
		return true
	})
	t.Logf("every chain on b %s after a stopped", time.Since(stopped).Round(time.Millisecond))
}

// cuttable dials through a switch: cutting closes every connection and
// refuses new ones, as a network partition between the instance and Kafka.
type cuttable struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (c *cuttable) dial(ctx context.Context, network, host string) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return nil, fmt.Errorf("partitioned")
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, network, host)
	if err == nil {
		c.conns = append(c.conns, conn)
	}
	return conn, err
}

func (c *cuttable) partition() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = true
	for _, conn := range c.conns {
		conn.Close()
	}
}

// TestPartitionedInstanceLosesItsChains cuts one instance off from Kafka:
// the group drops it after the session timeout and the other instance runs
// every chain; the cut-off instance stops its writers (its leases are lost).
func TestPartitionedInstanceLosesItsChains(t *testing.T) {
	addrs := newCluster(t)
	// Writers of the cut-off instance may still run while the group moves
	// its chains: that overlap is what fencing (package follow's producer)
	// makes harmless, so this test tracks the instances apart.
	la, lb := newLedger(t), newLedger(t)
	sw := &cuttable{}
	startInstance(t, addrs, la.runner("a"), kgo.Dialer(sw.dial))
	la.waitAll(t, 10*time.Second, func(map[string]string) bool { return true })
	b := startInstance(t, addrs, lb.runner("b"))
	require.Eventually(t, func() bool { return len(lb.owners()) > 0 }, 10*time.Second, 10*time.Millisecond)

	cut := time.Now()
	sw.partition()
	lb.waitAll(t, 10*session+5*time.Second, func(map[string]string) bool { return true })
	t.Logf("every chain on b %s after a was cut off (session timeout %s)", time.Since(cut).Round(time.Millisecond), session)
	require.Eventually(t, func() bool { return len(la.owners()) == 0 }, 30*time.Second, 10*time.Millisecond,
		"the cut-off instance still runs %v", la.owners())
	for _, c := range chainIDs {
		require.True(t, b.m.Writing(c), "b writes %s", c)
	}
}

// TestFencedWriterRetriesWhileLeaseHeld: a writer fenced while the group
// still gives this instance the lease runs again after a session timeout.
func TestFencedWriterRetriesWhileLeaseHeld(t *testing.T) {
	addrs := newCluster(t)
	var mu sync.Mutex
	calls := map[string][]time.Time{}
	startInstance(t, addrs, func(ctx context.Context, chain string) error {
		mu.Lock()
		calls[chain] = append(calls[chain], time.Now())
		n := len(calls[chain])
		mu.Unlock()
		if chain == "43114" && n == 1 {
			return fmt.Errorf("commit: %w", ErrFenced)
		}
		<-ctx.Done()
		return nil
	})
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls["43114"]) == 2
	}, 10*time.Second, 10*time.Millisecond)
	mu.Lock()
	gap := calls["43114"][1].Sub(calls["43114"][0])
	mu.Unlock()
	require.GreaterOrEqual(t, gap, session, "retried before a session timeout passed")
}

// TestFailedWriterStopsTheInstance: an error other than fencing (a reorg
// deeper than the window, say) ends Run with it, as a single instance
// would stop rather than guess.
func TestFailedWriterStopsTheInstance(t *testing.T) {
	addrs := newCluster(t)
	in := startInstance(t, addrs, func(ctx context.Context, chain string) error {
		if chain == "43419" {
			return fmt.Errorf("reorg too deep")
		}
		<-ctx.Done()
		return nil
	})
	select {
	case err := <-in.done:
		in.once.Do(func() { in.cancel() }) // ended by itself
		require.ErrorContains(t, err, "chain 43419: reorg too deep")
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end")
	}
}

func TestPartitionOfIsStable(t *testing.T) {
	// The mapping must not change between releases: instances of two
	// versions must agree on every chain's lease.
	want := map[string]int32{}
	for _, c := range chainIDs {
		want[c] = PartitionOf(c, 16)
	}
	for _, c := range chainIDs {
		require.Equal(t, want[c], PartitionOf(c, 16))
		require.Less(t, PartitionOf(c, 16), int32(16))
	}
	require.Equal(t, PartitionOf("43114", 16), int32(kgo.StickyKeyPartitioner(nil).ForTopic("x").Partition(&kgo.Record{Key: []byte("43114")}, 16)))
}
