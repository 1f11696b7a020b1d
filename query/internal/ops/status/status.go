// Package status is the operator's view of a running deployment behind
// `moraine-admin status`: per chain, the node's head, the head ingest has put
// into Kafka, the head the processor has written to ClickHouse, how far
// behind and how old that is, the rate and the time left; and every consumer
// group's lag.
//
// Each figure is read from where it is true rather than from the services'
// metrics (which would need every instance's address): each node's head and
// latency from its JSON-RPC (eth_blockNumber, through a pkg/rpc Pool of the
// chain's nodes) and the chain's head block from the best of them
// (eth_getBlockByNumber("latest")), the ingested head from the
// last block record of the chain's partition of the blocks topic, the
// indexed head from ClickHouse's chain_heads table, and the groups' lag from
// Kafka (kadm). Rates need two snapshots: Render compares the current one
// with the previous. What only ingest knows of each node (its share of the
// calls, their error rate, the answers that failed verification) comes from
// ingest's /metrics when Source.IngestMetrics names it.
//
// Given the processors' /metrics URLs (Source.ProcessorMetrics), it also
// shows each one's write budget (whether backfill gives way to reads or
// head blocks, and why): that state lives only in the processor.
package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/rpc"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

// Source is what a snapshot reads.
type Source struct {
	Chains []chains.Chain
	Kafka  kafkautil.Config
	// Client is a Kafka client built from Kafka (admin requests).
	Client *kgo.Client
	// Conn is moraine's ClickHouse database.
	Conn driver.Conn
	// HTTP asks the nodes, ingest and the processors (default: a client
	// with a 5 s timeout).
	HTTP *http.Client
	// IngestMetrics are the /metrics URLs of the ingest instances (summed):
	// the nodes' share of the work, error rates and verification failures.
	// Empty: those columns are not shown.
	IngestMetrics []string
	// ProcessorMetrics are the /metrics URLs of the processor instances
	// whose write budget to show, one row each; empty: no budget table.
	ProcessorMetrics []string
}

// Node is one node of a chain as the status sees it.
type Node struct {
	Name, URL string // URL redacted
	Head      uint64
	HeadKnown bool
	Err       string
	// Latency is the round trip of its eth_blockNumber.
	Latency time.Duration
	// From ingest's metrics (Known false without them): successful calls,
	// failed calls, answers that failed verification, since ingest started.
	Known                  bool
	OK, Failed, Unverified float64
}

// Block is a chain position: a block number, its timestamp (Unix seconds)
// and the cumulative transaction count up to it.
type Block struct {
	Number, Timestamp, CumulativeTxs uint64
}

// Chain is one chain's state. A nil position could not be read; Errors
// says why.
type Chain struct {
	ID                       uint64
	Name                     string
	Node, Ingested, Indexed  *Block
	NodeErr, KafkaErr, CHErr string
	// Nodes are the chain's nodes (rpcUrls), in configuration order.
	Nodes []Node
}

// Group is a consumer group's lag per topic.
type Group struct {
	Name, State string
	Members     int
	Lag         map[string]int64 // by topic
	Err         string
}

// Snapshot is the deployment's state at one instant.
type Snapshot struct {
	At      time.Time
	Chains  []Chain
	Groups  []Group
	Budgets []Budget
}

// Take reads a snapshot. Failures to read one part are recorded in it, not
// returned: a status view is most wanted when something is down.
func Take(ctx context.Context, src Source) Snapshot {
	if src.HTTP == nil {
		src.HTTP = &http.Client{Timeout: 5 * time.Second}
	}
	s := Snapshot{At: time.Now()}
	indexed, chErr := indexedHeads(ctx, src.Conn)
	ingest, ingestErr := scrapeIngest(ctx, src.HTTP, src.IngestMetrics)
	for _, c := range src.Chains {
		st := Chain{ID: c.ID(), Name: c.Name}
		st.Node, st.Nodes, st.NodeErr = nodes(ctx, src.HTTP, c)
		for i := range st.Nodes {
			addIngest(&st.Nodes[i], c.EVMChainID, ingest, ingestErr)
		}
		if b, err := ingestedHead(ctx, src, c.EVMChainID); err != nil {
			st.KafkaErr = err.Error()
		} else {
			st.Ingested = b
		}
		if chErr != nil {
			st.CHErr = chErr.Error()
		} else if b, ok := indexed[c.ID()]; ok {
			st.Indexed = &b
		}
		s.Chains = append(s.Chains, st)
	}
	s.Groups = groups(ctx, src)
	for _, u := range src.ProcessorMetrics {
		s.Budgets = append(s.Budgets, processorBudget(ctx, src.HTTP, u))
	}
	return s
}

// nodes asks each of the chain's nodes for its head (through the chain's
// pool, so the URLs are redacted and the errors classified as everywhere
// else), then the best of them for its latest block: the chain's head.
func nodes(ctx context.Context, hc *http.Client, c chains.Chain) (*Block, []Node, string) {
	cfg := rpc.ForChain(c)
	cfg.WSURL, cfg.HTTPClient, cfg.Timeout = "", hc, 5*time.Second
	pool, err := rpc.NewPool(cfg, nil)
	if err != nil {
		return nil, nil, "no rpcUrls"
	}
	pool.PollHeads(ctx)
	var out []Node
	for _, n := range pool.Nodes() {
		nd := Node{Name: n.Name, URL: n.URL, Head: n.Head, HeadKnown: n.HeadKnown, Latency: n.PollLatency}
		if !n.Up || !n.HeadKnown {
			nd.Err = "unreachable"
		}
		out = append(out, nd)
	}
	if _, ok := pool.Head(); !ok {
		return nil, out, "node unreachable"
	}
	raw, err := pool.Call(ctx, "eth_getBlockByNumber", "latest", false)
	if err != nil {
		return nil, out, "node: " + err.Error()
	}
	var res *struct {
		Number    string `json:"number"`
		Timestamp string `json:"timestamp"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, out, fmt.Sprintf("node's latest block: %v", err)
	}
	if res == nil {
		return nil, out, "node has no latest block"
	}
	n, err1 := strconv.ParseUint(strings.TrimPrefix(res.Number, "0x"), 16, 64)
	ts, err2 := strconv.ParseUint(strings.TrimPrefix(res.Timestamp, "0x"), 16, 64)
	if err := errors.Join(err1, err2); err != nil {
		return nil, out, fmt.Sprintf("node's latest block: %v", err)
	}
	return &Block{Number: n, Timestamp: ts}, out, ""
}

// ingestSeries are the sums, over ingest instances, of the per-node series
// the status shows, keyed by chain and node.
type ingestSeries map[[2]string]*[3]float64 // ok, failed, unverified

// scrapeIngest reads and sums the per-node series of the ingest instances.
func scrapeIngest(ctx context.Context, hc *http.Client, urls []string) (ingestSeries, error) {
	if len(urls) == 0 {
		return nil, nil
	}
	out := ingestSeries{}
	add := func(chain, node string, i int, v float64) {
		k := [2]string{chain, node}
		if out[k] == nil {
			out[k] = new([3]float64)
		}
		out[k][i] += v
	}
	var errs []error
	for _, u := range urls {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		resp, err := hc.Do(req)
		if err != nil {
			errs = append(errs, fmt.Errorf("ingest metrics %s: unreachable", rpc.Redact(u)))
			continue
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, 64<<20))
		resp.Body.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("ingest metrics %s: %w", rpc.Redact(u), err))
			continue
		}
		for name, f := range families {
			for _, m := range f.GetMetric() {
				l := map[string]string{}
				for _, p := range m.GetLabel() {
					l[p.GetName()] = p.GetValue()
				}
				v := m.GetCounter().GetValue()
				switch name {
				case "moraine_rpc_requests_total":
					if l["result"] == "ok" {
						add(l["chain"], l["node"], 0, v)
					} else {
						add(l["chain"], l["node"], 1, v)
					}
				case "moraine_ingest_verification_failures_total":
					add(l["chain"], l["node"], 2, v)
				}
			}
		}
	}
	return out, errors.Join(errs...)
}

func addIngest(n *Node, chain string, s ingestSeries, err error) {
	if s == nil || err != nil && len(s) == 0 {
		return
	}
	if v := s[[2]string{chain, n.Name}]; v != nil {
		n.Known, n.OK, n.Failed, n.Unverified = true, v[0], v[1], v[2]
	}
}

// indexedHeads reads every chain's head row from ClickHouse.
func indexedHeads(ctx context.Context, conn driver.Conn) (map[uint64]Block, error) {
	if conn == nil {
		return nil, errors.New("no ClickHouse connection")
	}
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rows, err := conn.Query(qctx, "SELECT chain_id, number, timestamp, cumulative_transactions FROM chain_heads FINAL")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[uint64]Block{}
	for rows.Next() {
		var id uint64
		var b Block
		if err := rows.Scan(&id, &b.Number, &b.Timestamp, &b.CumulativeTxs); err != nil {
			return nil, err
		}
		out[id] = b
	}
	return out, rows.Err()
}

// ingestedHead reads the newest block record of a chain from the end of its
// partition of the blocks topic (ingest keys records by chain, so one
// partition holds all of a chain's), looking further back while the tail
// holds only other chains' records.
func ingestedHead(ctx context.Context, src Source, chain string) (*Block, error) {
	if src.Client == nil {
		return nil, errors.New("no Kafka client")
	}
	topic := src.Kafka.Topic(topics.Blocks)
	adm := kadm.NewClient(src.Client)
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	td, err := adm.ListTopics(qctx, topic)
	if err == nil {
		err = td.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("blocks topic: %w", err)
	}
	n := len(td[topic].Partitions)
	if n == 0 {
		return nil, errors.New("blocks topic has no partitions")
	}
	p := int32(kgo.StickyKeyPartitioner(nil).ForTopic(topic).Partition(&kgo.Record{Topic: topic, Key: []byte(chain)}, n))
	ends, err := adm.ListEndOffsets(qctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("end offsets: %w", err)
	}
	starts, err := adm.ListStartOffsets(qctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("start offsets: %w", err)
	}
	end, _ := ends.Lookup(topic, p)
	start, _ := starts.Lookup(topic, p)
	for span := int64(16); ; span *= 16 {
		from := max(end.Offset-span, start.Offset)
		b, err := lastBlock(qctx, src, topic, p, from, end.Offset, chain)
		if err != nil || b != nil {
			return b, err
		}
		if from == start.Offset {
			return nil, errors.New("nothing ingested yet")
		}
	}
}

// lastBlock returns the last block of chain in [from, end) of one partition.
func lastBlock(ctx context.Context, src Source, topic string, p int32, from, end int64, chain string) (*Block, error) {
	if from >= end {
		return nil, nil
	}
	cl, err := kgo.NewClient(append(src.Kafka.BaseOpts(discard, "moraine-admin-status"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var last *Block
	for {
		// A poll that brings nothing for a second means the rest of the
		// partition is transaction markers (or the topic moved on).
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return last, fmt.Errorf("reading the blocks topic: %w", err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = err
			}
		})
		if ferr != nil {
			return last, fmt.Errorf("reading the blocks topic: %w", ferr)
		}
		records := fs.Records()
		if len(records) == 0 {
			return last, nil
		}
		done := false
		for _, r := range records {
			if r.Offset >= end-1 {
				done = true
			}
			if r.Offset >= end || string(r.Key) != chain {
				continue
			}
			ev, err := codec.DecodeChainEvent(r.Value)
			if err != nil {
				continue
			}
			if b, ok := ev.GetEvent().(*record.ChainEvent_Block); ok {
				last = &Block{Number: b.Block.Number, Timestamp: b.Block.Timestamp, CumulativeTxs: b.Block.CumulativeTransactions}
			}
		}
		if done {
			return last, nil
		}
	}
}

var discard = slog.New(slog.DiscardHandler)

// groups reads every consumer group of the deployment (those named with
// its topic prefix) and its lag.
func groups(ctx context.Context, src Source) []Group {
	if src.Client == nil {
		return nil
	}
	adm := kadm.NewClient(src.Client)
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	listed, err := adm.ListGroups(qctx)
	if err != nil {
		return []Group{{Name: "(all)", Err: err.Error()}}
	}
	var names []string
	for _, g := range listed.Groups() {
		if strings.HasPrefix(g, src.Kafka.TopicPrefix) {
			names = append(names, g)
		}
	}
	if len(names) == 0 {
		return nil
	}
	lags, err := adm.Lag(qctx, names...)
	if err != nil {
		return []Group{{Name: "(all)", Err: err.Error()}}
	}
	var out []Group
	for _, l := range lags.Sorted() {
		g := Group{Name: l.Group, State: l.State, Members: len(l.Members), Lag: map[string]int64{}}
		if err := l.Error(); err != nil {
			g.Err = err.Error()
		}
		for topic, lag := range l.Lag.TotalByTopic() {
			g.Lag[topic] = lag.Lag
		}
		out = append(out, g)
	}
	return out
}

// Render writes the snapshot as two tables; with prev (an earlier snapshot
// of the same deployment) it adds the rates over the time between them and
// the ETA to the node's head.
func Render(w io.Writer, prev *Snapshot, cur Snapshot) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	secs := 0.0
	if prev != nil {
		secs = cur.At.Sub(prev.At).Seconds()
	}
	fmt.Fprintf(tw, "CHAIN\tNAME\tNODE HEAD\tINGESTED\tINDEXED\tBEHIND\tLAG\tBLOCKS/S\tTX/S\tETA\n")
	for _, c := range cur.Chains {
		var before *Chain
		if prev != nil {
			for i := range prev.Chains {
				if prev.Chains[i].ID == c.ID {
					before = &prev.Chains[i]
				}
			}
		}
		behind, lag, bps, tps, eta := "-", "-", "-", "-", "-"
		if c.Node != nil && c.Indexed != nil {
			behind = strconv.FormatUint(c.Node.Number-min(c.Node.Number, c.Indexed.Number), 10)
			if c.Node.Timestamp >= c.Indexed.Timestamp {
				lag = (time.Duration(c.Node.Timestamp-c.Indexed.Timestamp) * time.Second).String()
			}
		}
		if before != nil && before.Indexed != nil && c.Indexed != nil && secs > 0 && c.Indexed.Number >= before.Indexed.Number {
			rate := float64(c.Indexed.Number-before.Indexed.Number) / secs
			bps = strconv.FormatFloat(rate, 'f', 1, 64)
			tps = strconv.FormatFloat(float64(c.Indexed.CumulativeTxs-min(c.Indexed.CumulativeTxs, before.Indexed.CumulativeTxs))/secs, 'f', 0, 64)
			switch {
			case c.Node != nil && c.Node.Number <= c.Indexed.Number:
				eta = "caught up"
			case c.Node != nil && rate > 0:
				eta = (time.Duration(float64(c.Node.Number-c.Indexed.Number)/rate) * time.Second).Round(time.Second).String()
			case c.Node != nil:
				eta = "stalled"
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.ID, c.Name,
			position(c.Node, c.NodeErr), position(c.Ingested, c.KafkaErr), position(c.Indexed, c.CHErr),
			behind, lag, bps, tps, eta)
	}
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "CHAIN\tNODE\tURL\tHEAD\tBEHIND\tLATENCY\tSHARE\tERRORS\tUNVERIFIED\t\n")
	for _, c := range cur.Chains {
		var best uint64
		total := 0.0
		for _, n := range c.Nodes {
			if n.HeadKnown {
				best = max(best, n.Head)
			}
			total += n.OK
		}
		for _, n := range c.Nodes {
			head, behind := "? ("+n.Err+")", "-"
			if n.Err == "" {
				head, behind = strconv.FormatUint(n.Head, 10), strconv.FormatUint(best-min(best, n.Head), 10)
			}
			share, errRate, unverified := "-", "-", "-"
			if n.Known {
				if total > 0 {
					share = strconv.FormatFloat(100*n.OK/total, 'f', 0, 64) + "%"
				}
				if calls := n.OK + n.Failed; calls > 0 {
					errRate = strconv.FormatFloat(100*n.Failed/calls, 'f', 1, 64) + "%"
				}
				unverified = strconv.FormatFloat(n.Unverified, 'f', 0, 64)
			}
			latency := "-"
			if n.Err == "" {
				latency = n.Latency.Round(100 * time.Microsecond).String()
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", c.ID, n.Name, n.URL, head, behind,
				latency, share, errRate, unverified)
		}
	}
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "CONSUMER GROUP\tSTATE\tMEMBERS\tTOPIC\tLAG\t\n")
	for _, g := range cur.Groups {
		if g.Err != "" {
			fmt.Fprintf(tw, "%s\t%s\t%d\t(error: %s)\t\t\n", g.Name, g.State, g.Members, g.Err)
			continue
		}
		ts := make([]string, 0, len(g.Lag))
		for t := range g.Lag {
			ts = append(ts, t)
		}
		sort.Strings(ts)
		for _, t := range ts {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t\n", g.Name, g.State, g.Members, t, g.Lag[t])
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// A table of its own: its columns are not the groups'.
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	renderBudgets(tw, prev, cur)
	return tw.Flush()
}

// position prints a block number, or why it is unknown.
func position(b *Block, err string) string {
	switch {
	case b != nil:
		return strconv.FormatUint(b.Number, 10)
	case err != "":
		return "? (" + err + ")"
	}
	return "-"
}
