package status

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

// TestStatusIntegration sets up what a deployment leaves behind (block
// records of two chains in the blocks topic, a head row in ClickHouse, a
// consumer group's committed offset, a node) and reads it back.
func TestStatusIntegration(t *testing.T) {
	kc := testenv.Kafka(t)
	_, conn := testenv.ClickHouse(t)
	logger := testenv.Logger(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kafkautil.NewClient(ctx, logger, kc.ProducerOpts(logger, "status-test")...)
	require.NoError(t, err)
	defer cl.Close()

	// Chain 4242 ingested up to block 50 (10 txs a block), chain 7 (keyed
	// the same way, maybe on the same partition) up to 3.
	topic := kc.Topic(topics.Blocks)
	produce := func(chain uint64, n uint64) *kgo.Record {
		v, err := codec.EncodeChainEvent(&record.ChainEvent{Event: &record.ChainEvent_Block{Block: &record.Block{
			ChainId: chain, Number: n, Timestamp: 1_700_000_000 + 2*n, CumulativeTransactions: 10 * n,
			Hash: make([]byte, 32), ParentHash: make([]byte, 32)}}})
		require.NoError(t, err)
		r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "%d", chain), Value: v}
		require.NoError(t, cl.ProduceSync(ctx, r).FirstErr())
		return r
	}
	var at40 *kgo.Record
	for n := uint64(1); n <= 50; n++ {
		r := produce(4242, n)
		if n == 40 {
			at40 = r
		}
		if n <= 3 {
			produce(7, n)
		}
	}
	require.NoError(t, conn.Exec(ctx, "INSERT INTO chain_heads (chain_id, number, hash, timestamp, cumulative_transactions, version) "+
		"SELECT 4242, 40, toFixedString('', 32), 1700000080, 400, 1"))
	// The sink's group has committed up to block 40 of chain 4242.
	group := kc.TopicPrefix + "moraine-processor"
	adm := kadm.NewClient(cl)
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: topic, Partition: at40.Partition, At: at40.Offset + 1, LeaderEpoch: -1})
	require.NoError(t, adm.CommitAllOffsets(ctx, group, offs))
	t.Cleanup(func() { _, _ = adm.DeleteGroups(context.Background(), group) })

	// Two nodes of chain 4242: one at block 100, one 10 behind.
	newNode := func(head int) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if strings.Contains(string(body), "eth_blockNumber") {
				fmt.Fprintf(w, `[{"jsonrpc":"2.0","id":0,"result":"%#x"}]`, head)
				return
			}
			fmt.Fprintf(w, `[{"jsonrpc":"2.0","id":0,"result":{"number":"%#x","timestamp":"%#x","hash":"0x00"}}]`, head, 1_700_000_000+2*head)
		}))
	}
	node, behind := newNode(100), newNode(90)
	defer node.Close()
	defer behind.Close()
	// What ingest says of them.
	ingest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `# TYPE moraine_rpc_requests_total counter
moraine_rpc_requests_total{chain="4242",method="eth_getBlockReceipts",node="a",result="ok"} 300
moraine_rpc_requests_total{chain="4242",method="eth_getBlockReceipts",node="a",result="timeout"} 0
moraine_rpc_requests_total{chain="4242",method="eth_getBlockReceipts",node="b",result="ok"} 100
moraine_rpc_requests_total{chain="4242",method="eth_getBlockReceipts",node="b",result="rate_limited"} 25
# TYPE moraine_ingest_verification_failures_total counter
moraine_ingest_verification_failures_total{chain="4242",check="receiptsRoot",node="b"} 7
`)
	}))
	defer ingest.Close()
	src := Source{
		Chains: []chains.Chain{
			{EVMChainID: "4242", Name: "Test chain", Nodes: []chains.Node{{URL: node.URL + "/secret-key", Name: "a"}, {URL: behind.URL, Name: "b"}}},
			{EVMChainID: "7", Name: "Other", RPCURLs: []string{"http://127.0.0.1:1"}},
		},
		Kafka: kc, Client: cl, Conn: conn, IngestMetrics: []string{ingest.URL},
	}
	s := Take(ctx, src)
	require.Len(t, s.Chains, 2)
	c := s.Chains[0]
	require.Equal(t, &Block{Number: 100, Timestamp: 1_700_000_200}, c.Node)
	require.Equal(t, &Block{Number: 50, Timestamp: 1_700_000_100, CumulativeTxs: 500}, c.Ingested)
	require.Equal(t, &Block{Number: 40, Timestamp: 1_700_000_080, CumulativeTxs: 400}, c.Indexed)
	o := s.Chains[1]
	require.Nil(t, o.Node)
	require.Equal(t, "node unreachable", o.NodeErr)
	require.Equal(t, uint64(3), o.Ingested.Number, o.KafkaErr)
	require.Nil(t, o.Indexed)
	var g *Group
	for i := range s.Groups {
		if s.Groups[i].Name == group {
			g = &s.Groups[i]
		}
	}
	require.NotNil(t, g, "groups: %+v", s.Groups)
	// Blocks 41..50 of 4242; a group without members is taken to consume
	// every partition, so chain 7's three records count too when they are
	// on another partition (where nothing was committed).
	want := int64(10)
	if p7 := int32(kgo.StickyKeyPartitioner(nil).ForTopic(topic).Partition(&kgo.Record{Key: []byte("7")}, 4)); p7 != at40.Partition {
		want += 3
	}
	require.Equal(t, want, g.Lag[topic])

	// Five seconds later the processor has written 10 more blocks.
	later := s
	later.At = s.At.Add(5 * time.Second)
	later.Chains = append([]Chain(nil), s.Chains...)
	later.Chains[0].Indexed = &Block{Number: 50, Timestamp: 1_700_000_100, CumulativeTxs: 500}
	var out bytes.Buffer
	require.NoError(t, Render(&out, &s, later))
	t.Logf("\n%s", out.String())
	lines := strings.Split(out.String(), "\n")
	require.Regexp(t, `^4242\s+Test chain\s+100\s+50\s+50\s+50\s+1m40s\s+2\.0\s+20\s+25s\s*$`, lines[1])
	require.Regexp(t, `^7\s+Other\s+\? \(node unreachable\)\s+3\s+-\s+-`, lines[2])
	require.Regexp(t, fmt.Sprintf(`(?m)^%s\s+Empty\s+0\s+%s\s+%d\s*$`, group, topic, want), out.String())
	// Each node: head, how far behind the best, latency, share of the
	// calls, error rate and verification failures (from ingest).
	require.Regexp(t, `(?m)^4242\s+a\s+http://127\.0\.0\.1:\d+/\.\.\.\s+100\s+0\s+\S+\s+75%\s+0\.0%\s+0\s*$`, out.String())
	require.Regexp(t, `(?m)^4242\s+b\s+http://127\.0\.0\.1:\d+\s+90\s+10\s+\S+\s+25%\s+20\.0%\s+7\s*$`, out.String())
	require.Regexp(t, `(?m)^7\s+0\s+http://127\.0\.0\.1:1\s+\? \(unreachable\)`, out.String())
	require.NotContains(t, out.String(), "secret-key")
}
