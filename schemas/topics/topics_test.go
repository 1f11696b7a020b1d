package topics

import "testing"

// TestReplicationResolve checks the derived defaults: right for one
// development broker and for a production cluster, and explicit settings
// kept.
func TestReplicationResolve(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      Replication
		brokers int
		want    Replication
	}{
		{"one broker", Replication{}, 1, Replication{Factor: 1, MinInsyncReplicas: 1}},
		// Two brokers: two copies, but writes go on with one down.
		{"two brokers", Replication{}, 2, Replication{Factor: 2, MinInsyncReplicas: 1}},
		{"three brokers", Replication{}, 3, Replication{Factor: 3, MinInsyncReplicas: 2}},
		// Larger clusters still keep three copies by default.
		{"seven brokers", Replication{}, 7, Replication{Factor: 3, MinInsyncReplicas: 2}},
		{"explicit factor", Replication{Factor: 5}, 7, Replication{Factor: 5, MinInsyncReplicas: 3}},
		{"explicit both", Replication{Factor: 3, MinInsyncReplicas: 3}, 3, Replication{Factor: 3, MinInsyncReplicas: 3}},
		// No broker in the metadata (should not happen): still one copy.
		{"no brokers", Replication{}, 0, Replication{Factor: 1, MinInsyncReplicas: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.in.resolve(tc.brokers); got != tc.want {
				t.Fatalf("resolve(%d) = %+v, want %+v", tc.brokers, got, tc.want)
			}
		})
	}
}

// TestWithConfigCopies checks that adding a config never writes into the
// shared All specs.
func TestWithConfigCopies(t *testing.T) {
	out := withConfig(All, "min.insync.replicas", "2")
	if out[0].Configs["min.insync.replicas"] != "2" {
		t.Fatal("config not set")
	}
	if _, ok := All[0].Configs["min.insync.replicas"]; ok {
		t.Fatal("withConfig modified the shared specs")
	}
}
