// Package topics declares moraine's Kafka topics as data and applies them.
//
// Every service and test creates topics from this one list, so names,
// partition counts and configs cannot drift between producers and consumers.
package topics

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topic names. They are constants so that code and dashboards agree.
const (
	// Blocks carries record.ChainEvent values keyed by decimal chain id.
	Blocks = "moraine.blocks"
	// AddressWatch is the compacted table of watched addresses and webhook
	// settings; the processor reads it from the start to build its watch table.
	AddressWatch = "moraine.address-watch"
	// Activity carries one matched (webhook, transaction) message, keyed by webhook id.
	Activity = "moraine.activity"
	// WebhookStreams is the matcher's compacted state of every webhook's
	// message stream (sequence numbers, messages awaiting confirmations,
	// messages to retract on a reorg), written in the matcher's
	// transactions (proto/moraine/v1/stream.proto).
	WebhookStreams = "moraine.webhook-streams"
	// Replay carries the messages of replay jobs (Activity values, keyed by
	// webhook id, produced by the processor's replay runner), which delivery
	// sends beside the activity topic with its own, smaller share of
	// attempts, so that a replay never delays live messages.
	Replay = "moraine.replay"
	// ReplayFence carries no records: a replay's transaction commits offset
	// 0 of its one partition in the matcher's consumer group, which the
	// group's coordinator accepts only from a member of the group's current
	// generation (processor/internal/replay, "Membership").
	ReplayFence = "moraine.replay-fence"
	// IngestLeases carries no records: ingest instances join a consumer
	// group on it, and the instance assigned a partition writes the chains
	// whose ids hash to it (ingest/internal/lease).
	IngestLeases = "moraine.ingest-leases"
	// APIRequests carries one record.ApiRequest per request the query
	// service answered on a /v1 route, unkeyed; the processor's usage sink
	// writes them to ClickHouse. It is the request log's buffer while
	// ClickHouse is down: its retention bounds how long an outage of
	// ClickHouse (or of the sink) loses nothing.
	APIRequests = "moraine.api-requests"
	// Operations carries one record.OperationTask per export job to run,
	// keyed by operation id; the query service's export workers consume it.
	Operations = "moraine.operations"
	// NftMetadata carries record.NftMetadataRequest values (codec) keyed by
	// codec.NftMetadataKey: NFTs whose metadata the processor's metadata
	// worker is asked to fetch (discovered in blocks, or reindexNft).
	NftMetadata = "moraine.nft-metadata"
)

// NftMetadataRetryLevels is the number of NFT metadata retry topics: one
// per delay of the metadata worker's retry schedule (--nft.retry-schedule).
const NftMetadataRetryLevels = 4

// NftMetadataRetry returns the name of retry level l
// (1..NftMetadataRetryLevels): requests waiting out the l-th delay after a
// transient failure (throttled, unreachable, node unavailable), with the
// attempt to make next and its due time in the record. As for delivery's
// levels, every record of a level waits the same delay, so a partition is
// in due order.
func NftMetadataRetry(l int) string { return fmt.Sprintf("moraine.nft-metadata-retry-%d", l) }

// DeliveryRetryLevels is the number of delivery retry topics: one per
// delay of the hosted service's retry schedule (the waits before attempts
// 2 to 10; CONTRACT.md section 5.5).
const DeliveryRetryLevels = 9

// DeliveryRetry returns the name of retry level l (1..DeliveryRetryLevels).
// Level l holds messages waiting out the l-th delay of delivery's retry
// schedule: the activity value unchanged, keyed by webhook id, with the
// attempt to make next and its due time in headers. Every record of a level
// waits the same delay, so a partition is in due order and its consumer
// only ever waits for the head.
func DeliveryRetry(l int) string { return fmt.Sprintf("moraine.delivery-retry-%d", l) }

// deliveryRetryRetention outlives the longest delay (24 h) with room for an
// outage of delivery: a pending retry must never expire unread.
const deliveryRetryRetention = "604800000" // 7 days

// Spec describes one topic.
type Spec struct {
	Name       string
	Partitions int32
	Configs    map[string]string
}

// maxRecordBytes bounds one record. A block with full call traces can reach
// several MiB on busy chains; Kafka's 1 MiB default would reject it.
const maxRecordBytes = "16777216"

// All is every topic moraine uses.
var All = []Spec{
	{Name: Blocks, Partitions: 4, Configs: map[string]string{
		"cleanup.policy":    "delete",
		"retention.ms":      "604800000", // 7 days: enough to rebuild ClickHouse after an outage.
		"max.message.bytes": maxRecordBytes,
		"compression.type":  "producer",
	}},
	{Name: AddressWatch, Partitions: 4, Configs: map[string]string{
		"cleanup.policy":            "compact",
		"min.cleanable.dirty.ratio": "0.1",
		"segment.ms":                "3600000", // roll hourly so compaction can run.
		"delete.retention.ms":       "86400000",
		"max.message.bytes":         maxRecordBytes,
	}},
	{Name: Activity, Partitions: 8, Configs: map[string]string{
		"cleanup.policy":    "delete",
		"retention.ms":      "259200000", // 3 days: longer than the 48 h retry window.
		"max.message.bytes": maxRecordBytes,
	}},
	{Name: Replay, Partitions: 8, Configs: map[string]string{
		"cleanup.policy":    "delete",
		"retention.ms":      "259200000", // 3 days, as the activity topic.
		"max.message.bytes": maxRecordBytes,
	}},
	// 8 partitions: up to 8 usage sinks share the writes. 3 days outlive a
	// long weekend's outage of ClickHouse or of the processors.
	{Name: APIRequests, Partitions: 8, Configs: map[string]string{
		"cleanup.policy":    "delete",
		"retention.ms":      "259200000",
		"max.message.bytes": maxRecordBytes,
		"compression.type":  "producer",
	}},
	// 4 partitions: up to 4 query instances run export jobs at once. A job
	// left unfinished this long is republished from ClickHouse anyway.
	{Name: Operations, Partitions: 4, Configs: map[string]string{
		"cleanup.policy": "delete",
		"retention.ms":   "604800000",
	}},
	{Name: WebhookStreams, Partitions: 4, Configs: map[string]string{
		"cleanup.policy":            "compact",
		"min.cleanable.dirty.ratio": "0.1",
		"segment.ms":                "3600000", // roll hourly so compaction can run.
		// Tombstones of blocks that left the retraction window must
		// outlive a reader's full read; a day is plenty.
		"delete.retention.ms": "86400000",
		"max.message.bytes":   maxRecordBytes,
	}},
	{Name: ReplayFence, Partitions: 1, Configs: map[string]string{
		"cleanup.policy": "delete",
		"retention.ms":   "3600000",
	}},
	// 16 leases: enough for the chains of a deployment to spread over its
	// ingest instances; chains sharing a lease move together.
	{Name: IngestLeases, Partitions: 16, Configs: map[string]string{
		"cleanup.policy": "delete",
		"retention.ms":   "3600000",
	}},
}

func init() {
	// 8 partitions: the metadata worker's unit of scale-out (a partition's
	// requests go to one instance at a time).
	All = append(All, Spec{Name: NftMetadata, Partitions: 8, Configs: map[string]string{
		"cleanup.policy": "delete",
		"retention.ms":   "604800000", // 7 days, as the blocks it comes from.
	}})
	for l := 1; l <= NftMetadataRetryLevels; l++ {
		All = append(All, Spec{Name: NftMetadataRetry(l), Partitions: 8, Configs: map[string]string{
			"cleanup.policy": "delete",
			"retention.ms":   "604800000", // 7 days: far above the longest delay.
		}})
	}
	for l := 1; l <= DeliveryRetryLevels; l++ {
		All = append(All, Spec{Name: DeliveryRetry(l), Partitions: 4, Configs: map[string]string{
			"cleanup.policy":    "delete",
			"retention.ms":      deliveryRetryRetention,
			"max.message.bytes": maxRecordBytes,
		}})
	}
}

// Replication says how many copies of each partition the cluster keeps.
// Zero values are derived from the cluster's size by Ensure, so one default
// is right both for a single development broker and for a production
// cluster of three or more.
type Replication struct {
	// Factor is the replication factor of the topics Ensure creates; 0
	// means min(3, number of brokers).
	Factor int16
	// MinInsyncReplicas is every topic's min.insync.replicas: with acks=all
	// (every moraine producer), a write is acknowledged only once this many
	// replicas have it. 0 means a majority of the replicas for a factor of
	// 3 or more (2 of 3: one broker may be down without stopping writes,
	// and an acknowledged write survives the loss of any one), else 1.
	MinInsyncReplicas int
}

// resolve fills the zero values from the number of brokers.
func (r Replication) resolve(brokers int) Replication {
	if r.Factor <= 0 {
		r.Factor = int16(min(3, max(brokers, 1)))
	}
	if r.MinInsyncReplicas <= 0 {
		r.MinInsyncReplicas = 1
		if r.Factor >= 3 {
			r.MinInsyncReplicas = int(r.Factor)/2 + 1
		}
	}
	return r
}

// EnsureResult says what Ensure did and found.
type EnsureResult struct {
	// Created names the topics Ensure created (or found created by someone
	// else meanwhile); they may not be visible in every broker's metadata
	// yet.
	Created []string
	// UnderReplicated names existing topics with fewer replicas than the
	// replication factor: Ensure never moves partitions (that is a
	// reassignment, an operator's decision), so the operator is told.
	UnderReplicated []string
	// Replication is the resolved replication.
	Replication Replication
}

// Ensure creates the missing topics of specs with the replication factor
// and sets the configs of existing ones that differ from their spec (with
// min.insync.replicas added to every spec). It is idempotent: running it
// again changes nothing.
//
// Every service runs it at start-up, so the usual case (all topics there,
// configs as specified) costs two requests, a metadata request (which also
// counts the brokers) and one DescribeConfigs, and writes nothing: every
// alteration is a write to the cluster's metadata log.
func Ensure(ctx context.Context, adm *kadm.Client, specs []Spec, repl Replication) (EnsureResult, error) {
	meta, err := adm.Metadata(ctx, Names(specs)...)
	if err != nil {
		return EnsureResult{}, fmt.Errorf("list topics: %w", err)
	}
	res := EnsureResult{Replication: repl.resolve(len(meta.Brokers))}
	minISR := strconv.Itoa(res.Replication.MinInsyncReplicas)
	specs = withConfig(specs, "min.insync.replicas", minISR)
	var missing, existing []Spec
	for _, s := range specs {
		d, ok := meta.Topics[s.Name]
		if !ok || d.Err != nil {
			missing = append(missing, s)
			continue
		}
		existing = append(existing, s)
		for _, p := range d.Partitions {
			if len(p.Replicas) < int(res.Replication.Factor) {
				res.UnderReplicated = append(res.UnderReplicated, s.Name)
				break
			}
		}
	}
	// Create the missing topics concurrently: each is a round trip to the
	// controller.
	results := make([]error, len(missing))
	var wg sync.WaitGroup
	for i, s := range missing {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := adm.CreateTopic(ctx, s.Partitions, res.Replication.Factor, ptrs(s.Configs), s.Name)
			if err == nil {
				err = resp.Err
			}
			results[i] = err
		}()
	}
	wg.Wait()
	var errs []error
	for i, s := range missing {
		switch err := results[i]; {
		case err == nil:
			res.Created = append(res.Created, s.Name)
		case errors.Is(err, kerr.TopicAlreadyExists):
			// Created by another service meanwhile: check its configs.
			res.Created = append(res.Created, s.Name)
			existing = append(existing, s)
		default:
			errs = append(errs, fmt.Errorf("create topic %s: %w", s.Name, err))
		}
	}
	if err := alignConfigs(ctx, adm, existing); err != nil {
		errs = append(errs, err)
	}
	return res, errors.Join(errs...)
}

// withConfig returns copies of specs with config key set to value.
func withConfig(specs []Spec, key, value string) []Spec {
	out := make([]Spec, len(specs))
	for i, s := range specs {
		cfg := make(map[string]string, len(s.Configs)+1)
		for k, v := range s.Configs {
			cfg[k] = v
		}
		cfg[key] = value
		s.Configs = cfg
		out[i] = s
	}
	return out
}

// alignConfigs sets the configs of existing topics that differ from their
// spec (changed by hand, or by an older moraine).
func alignConfigs(ctx context.Context, adm *kadm.Client, specs []Spec) error {
	if len(specs) == 0 {
		return nil
	}
	described, err := adm.DescribeTopicConfigs(ctx, Names(specs)...)
	if err != nil {
		return fmt.Errorf("describe topic configs: %w", err)
	}
	var errs []error
	for _, s := range specs {
		rc, err := described.On(s.Name, nil)
		if err == nil {
			err = rc.Err
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("describe topic %s configs: %w", s.Name, err))
			continue
		}
		current := map[string]string{}
		for _, c := range rc.Configs {
			current[c.Key] = c.MaybeValue()
		}
		var alters []kadm.AlterConfig
		for k, v := range s.Configs {
			if cur, ok := current[k]; !ok || cur != v {
				alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v})
			}
		}
		if len(alters) > 0 {
			if err := alter(ctx, adm, s.Name, alters); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func ptrs(configs map[string]string) map[string]*string {
	out := make(map[string]*string, len(configs))
	for k, v := range configs {
		out[k] = &v
	}
	return out
}

// WaitVisible waits until every broker's metadata lists every topic with
// its partitions: a topic just created is unknown to the brokers for a
// moment (on a cluster, to each broker until the controller's metadata
// reaches it), and a client that starts then (a test, a service) must not
// trip on it. Each broker is asked directly, bypassing the client's
// metadata cache.
func WaitVisible(ctx context.Context, cl *kgo.Client, specs []Spec) error {
	req := kmsg.NewPtrMetadataRequest()
	for _, s := range specs {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(s.Name)
		req.Topics = append(req.Topics, t)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		missing, err := invisible(ctx, cl, req, specs)
		if err == nil && missing == "" {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("topic %s not visible in metadata", missing)
			}
			return fmt.Errorf("topics: wait for created topics: %w", err)
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// invisible returns a broker and topic whose metadata lacks the topic or
// some of its partitions, or "" when every broker has them all.
func invisible(ctx context.Context, cl *kgo.Client, req *kmsg.MetadataRequest, specs []Spec) (string, error) {
	brokers, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		return "", err
	}
	for _, b := range brokers.Brokers {
		kresp, err := cl.Broker(int(b.NodeID)).Request(ctx, req)
		if err != nil {
			return "", err
		}
		resp := kresp.(*kmsg.MetadataResponse)
		have := map[string]int{}
		for _, t := range resp.Topics {
			if t.Topic != nil && t.ErrorCode == 0 {
				have[*t.Topic] = len(t.Partitions)
			}
		}
		for _, s := range specs {
			if int32(have[s.Name]) < s.Partitions {
				return fmt.Sprintf("%s on broker %d", s.Name, b.NodeID), nil
			}
		}
	}
	return "", nil
}

func alter(ctx context.Context, adm *kadm.Client, topic string, alters []kadm.AlterConfig) error {
	resps, err := adm.AlterTopicConfigs(ctx, alters, topic)
	if err == nil {
		for _, r := range resps {
			if r.Err != nil {
				err = r.Err
			}
		}
	}
	if err != nil {
		return fmt.Errorf("alter topic %s configs: %w", topic, err)
	}
	return nil
}

// WithPrefix returns specs renamed with a prefix, so tests can run on one
// broker without sharing topics.
func WithPrefix(prefix string, specs []Spec) []Spec {
	out := make([]Spec, len(specs))
	for i, s := range specs {
		s.Name = prefix + s.Name
		out[i] = s
	}
	return out
}

// Names returns the names of specs.
func Names(specs []Spec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Name
	}
	return out
}

// Lookup returns the spec whose name ends in name (so prefixed test topics match).
func Lookup(specs []Spec, name string) (Spec, bool) {
	for _, s := range specs {
		if strings.HasSuffix(s.Name, name) {
			return s, true
		}
	}
	return Spec{}, false
}
