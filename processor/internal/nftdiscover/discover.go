// Package nftdiscover finds the NFTs of indexed blocks and asks the
// metadata worker (package nftworker) to fetch their metadata: a consumer
// group of its own (--nft.discovery-group) on the blocks topic decodes the
// ERC-721 Transfer and ERC-1155 TransferSingle/TransferBatch logs of every
// successful transaction (pkg/evm.Transfers, the decoder of webhook
// payloads and transfer lists) and produces one NftMetadataRequest per NFT
// to the moraine.nft-metadata topic, keyed by the NFT.
//
// Why the blocks topic and not ClickHouse's logs table: the topic hands
// each block over once, in order, to one instance per partition, with
// offsets that survive restarts, at the cost of reading the block again
// (the batches are decompressed once for the sink, the matcher and this
// consumer, and only the logs are read: codec.BlockLogs); polling the logs
// table would need a cursor per chain, leases between instances, a scan per
// poll and its own reorg handling, and would add read load to the database
// the API serves from. Measured figures:
// processor/README.md.
//
// Guarantees: at least once. Offsets are committed after the batch's
// requests are acknowledged by Kafka (acks=all), so a crash repeats
// requests, never loses one; the worker skips an NFT it has already
// fetched. A bounded set of recently requested NFTs (--nft.discovery-cache)
// spares the topic the repeats of busy tokens (an ERC-1155 id minted every
// block). Reorg markers produce nothing: metadata belongs to the token,
// not to a block. Discovery never waits for a fetch: a slow metadata host
// delays neither this group nor the sink and the matcher, whose groups are
// separate.
//
// Metrics:
//
//	moraine_processor_nft_discovered_total{standard}   requests produced (721, 1155)
//	moraine_processor_nft_discovery_batch_duration_seconds
package nftdiscover

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/nftmeta"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

// Config configures discovery (the worker's Config holds the flags).
type Config struct {
	Group string
	// StartOffset is where a group without committed offsets starts:
	// "start" (every retained block) or "end" (new blocks only).
	StartOffset string
	// CacheSize bounds the set of recently requested NFTs.
	CacheSize      int
	MaxPollRecords int
}

// Deps are discovery's dependencies.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Kafka      kafkautil.Config
	// Decompressor, when set, is shared with the processor's other readers
	// of the blocks topic.
	Decompressor kgo.Decompressor
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Discoverer is the discovery consumer.
type Discoverer struct {
	cfg    Config
	d      Deps
	logger *slog.Logger
	seen   *recent

	produced *prometheus.CounterVec
	duration prometheus.Histogram
}

// New registers the metrics; it does no I/O.
func New(cfg Config, d Deps) (*Discoverer, error) {
	if d.Logger == nil || d.Registerer == nil {
		return nil, errors.New("nftdiscover: Deps.Logger and Deps.Registerer are required")
	}
	if cfg.Group == "" || cfg.CacheSize <= 0 || cfg.MaxPollRecords <= 0 || (cfg.StartOffset != "start" && cfg.StartOffset != "end") {
		return nil, errors.New("nftdiscover: a group, a positive cache size and poll size, and a start offset of start or end are required")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	f := obs.NewMetrics(d.Registerer, "processor")
	x := &Discoverer{cfg: cfg, d: d, logger: d.Logger.With("component", "nftdiscover"), seen: newRecent(cfg.CacheSize),
		produced: f.CounterVec("nft_discovered_total", "NFT metadata requests produced by discovery, by token standard.", "standard"),
		duration: f.Histogram("nft_discovery_batch_duration_seconds", "Time per discovery batch (decode, produce).",
			prometheus.ExponentialBuckets(0.0005, 2, 16)),
	}
	for _, s := range []string{"721", "1155"} {
		x.produced.WithLabelValues(s)
	}
	return x, nil
}

// commitInterval is how often the offsets of finished batches are committed
// (and when partitions are revoked): a batch read again after a crash
// repeats requests the worker skips, so there is no need for a commit per
// batch.
const commitInterval = 5 * time.Second

// Group is the consumer group, prefixed.
func (x *Discoverer) Group() string { return x.d.Kafka.TopicPrefix + x.cfg.Group }

// Run consumes blocks until ctx ends. A failed client is rebuilt with
// backoff; what it had not committed is read again.
func (x *Discoverer) Run(ctx context.Context) error {
	again := obs.Retry{Initial: 200 * time.Millisecond, Max: 10 * time.Second, Log: x.logger, Msg: "nft discovery failed; restarting it"}
	_ = again.Do(ctx, func() error {
		if err := x.session(ctx); err != nil || ctx.Err() != nil {
			return err
		}
		return errors.New("nftdiscover: session ended")
	})
	return nil
}

func (x *Discoverer) session(ctx context.Context) error {
	k := x.d.Kafka
	reset := kgo.NewOffset().AtStart()
	if x.cfg.StartOffset == "end" {
		reset = kgo.NewOffset().AtEnd()
	}
	opts := append(k.MarkingConsumerOpts(x.logger, "moraine-nft-discovery", x.Group(), commitInterval, k.Topic(topics.Blocks)),
		kgo.ConsumeResetOffset(reset),
		// Requests are small; acks=all and idempotence (franz-go's default)
		// as for every moraine producer: an acknowledged request is kept.
		kgo.DefaultProduceTopic(k.Topic(topics.NftMetadata)),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
	)
	if x.d.Decompressor != nil {
		opts = append(opts, kgo.WithDecompressor(x.d.Decompressor))
	}
	cl, err := kafkautil.NewClient(ctx, x.logger, opts...)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		cl.LeaveGroupContext(closeCtx)
		cl.Close()
	}()
	x.logger.Info("nft discovery consuming", "topic", k.Topic(topics.Blocks), "group", x.Group())
	for {
		fetches := cl.PollRecords(ctx, x.cfg.MaxPollRecords)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			cl.AllowRebalance()
			return nil
		}
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				x.logger.Warn("fetch error, retrying", "topic", t, "partition", p, "err", err)
			}
		})
		records := fetches.Records()
		if len(records) > 0 {
			if err := x.batch(ctx, cl, records); err != nil {
				cl.AllowRebalance()
				return err
			}
		}
		cl.AllowRebalance()
	}
}

// batch produces the requests of records, then marks them for the next
// commit. A batch already polled is finished even when shutdown begins.
func (x *Discoverer) batch(ctx context.Context, cl *kgo.Client, records []*kgo.Record) error {
	start := time.Now()
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	out := x.requests(records)
	if len(out) > 0 {
		if err := cl.ProduceSync(bctx, out...).FirstErr(); err != nil {
			return fmt.Errorf("nftdiscover: produce requests: %w", err)
		}
	}
	cl.MarkCommitRecords(records...)
	x.duration.Observe(time.Since(start).Seconds())
	return nil
}

// requests decodes records and builds one request per NFT not requested
// recently.
func (x *Discoverer) requests(records []*kgo.Record) []*kgo.Record {
	var out []*kgo.Record
	now := x.d.Now().UnixMilli()
	for _, r := range records {
		// Only the logs are read: decoding whole blocks (their transactions'
		// fields and call traces) was most of this consumer's CPU.
		var logs []codec.LogView
		chain, number, isBlock, err := codec.BlockLogs(r.Value, func(status uint32, l *codec.LogView) {
			if status == 1 {
				logs = append(logs, *l)
			}
		})
		if err != nil {
			x.logger.Error("skipping undecodable record", "partition", r.Partition, "offset", r.Offset, "err", err)
			continue
		}
		if !isBlock {
			continue // a reorg marker
		}
		for _, l := range logs {
			contract, ok := evm.AddressFrom(l.Address)
			if !ok {
				continue
			}
			evm.Transfers(l.Topics, l.Data, func(t evm.Transfer) {
				if t.Kind != evm.ERC721 && t.Kind != evm.ERC1155 {
					return
				}
				ref := nftmeta.Ref{ChainID: chain, Contract: contract, TokenID: nftmeta.TokenIDFromWord(t.TokenID)}
				if !x.seen.add(ref) {
					return
				}
				standard := uint32(721)
				if t.Kind == evm.ERC1155 {
					standard = 1155
				}
				req := &record.NftMetadataRequest{ChainId: ref.ChainID, Contract: ref.Contract[:], TokenId: ref.TokenID,
					Standard: standard, SeenBlock: number, Reason: record.NftMetadataRequest_REASON_DISCOVERED,
					RequestedAtUnixMs: now, Attempt: 1}
				val, err := codec.EncodeNftMetadataRequest(req)
				if err != nil {
					x.logger.Error("encoding a metadata request", "err", err)
					return
				}
				out = append(out, &kgo.Record{Key: codec.NftMetadataKey(ref.ChainID, ref.Contract[:], ref.TokenID), Value: val,
					Headers: []kgo.RecordHeader{{Key: codec.SchemaHeader, Value: []byte(codec.NftMetadataRequestSchema)}}})
				x.produced.WithLabelValues(strconv.Itoa(int(standard))).Inc()
			})
		}
	}
	return out
}

// recent is a bounded set of NFTs, the least recently added dropped first.
type recent struct {
	size  int
	lru   *list.List
	index map[nftmeta.Ref]*list.Element
}

func newRecent(size int) *recent {
	return &recent{size: size, lru: list.New(), index: map[nftmeta.Ref]*list.Element{}}
}

// add reports whether ref was not in the set, and adds it.
func (s *recent) add(ref nftmeta.Ref) bool {
	if el, ok := s.index[ref]; ok {
		s.lru.MoveToFront(el)
		return false
	}
	s.index[ref] = s.lru.PushFront(ref)
	if s.lru.Len() > s.size {
		old := s.lru.Back()
		s.lru.Remove(old)
		delete(s.index, old.Value.(nftmeta.Ref))
	}
	return true
}
