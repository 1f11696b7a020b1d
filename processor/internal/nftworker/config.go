package nftworker

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/moraine-data/moraine/pkg/process"
	"github.com/moraine-data/moraine/processor/internal/nftfetch"
	"github.com/moraine-data/moraine/schemas/topics"
)

// Config configures NFT discovery and the metadata worker (the --nft.* flags).
type Config struct {
	Enabled              bool
	Group                string
	DiscoveryGroup       string
	DiscoveryStartOffset string
	DiscoveryCache       int
	MaxPollRecords       int
	// RetrySchedule is the wait before attempts 2, 3, ...: one delay per
	// retry level (topics.NftMetadataRetryLevels of them).
	RetrySchedule []time.Duration
	RPCTimeout    time.Duration
	// SessionTimeout is the metadata group's session timeout.
	SessionTimeout time.Duration
	Fetch          nftfetch.Config
	// ShutdownTimeout (the processor's --shutdown.timeout, not an --nft
	// flag) bounds how long a batch already polled may take to finish on
	// shutdown.
	ShutdownTimeout time.Duration
}

// DefaultRetrySchedule is --nft.retry-schedule's default.
var DefaultRetrySchedule = []time.Duration{time.Minute, 10 * time.Minute, time.Hour, 6 * time.Hour}

// RegisterFlags adds the --nft.* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.Enabled, "nft.enabled", true, "run NFT discovery and the NFT metadata worker (tokenURI/uri, metadata documents, reindexNft)")
	fs.StringVar(&c.Group, "nft.group", "moraine-nft-metadata", "Kafka consumer group of the NFT metadata worker (--kafka.topic-prefix is prepended)")
	fs.StringVar(&c.DiscoveryGroup, "nft.discovery-group", "moraine-nft-discovery", "Kafka consumer group of NFT discovery on the blocks topic (--kafka.topic-prefix is prepended)")
	fs.StringVar(&c.DiscoveryStartOffset, "nft.discovery-start-offset", "start", "where a discovery group without committed offsets starts: start (all retained blocks) or end (new blocks only)")
	fs.IntVar(&c.DiscoveryCache, "nft.discovery-cache", 100_000, "NFTs discovery remembers as requested (it skips them when seen again; a restart forgets; about 200 bytes each)")
	fs.IntVar(&c.MaxPollRecords, "nft.max-poll-records", 500, "metadata requests per worker batch (fetched concurrently)")
	c.RetrySchedule = append([]time.Duration(nil), DefaultRetrySchedule...)
	fs.Func("nft.retry-schedule", fmt.Sprintf("waits before attempts 2..%d of a metadata fetch that failed transiently (throttled, unreachable, node unavailable), comma-separated (default %s)",
		topics.NftMetadataRetryLevels+1, formatSchedule(DefaultRetrySchedule)), func(s string) error {
		var out []time.Duration
		for _, p := range process.SplitList(s) {
			d, err := time.ParseDuration(p)
			if err != nil {
				return err
			}
			out = append(out, d)
		}
		c.RetrySchedule = out
		return nil
	})
	fs.DurationVar(&c.RPCTimeout, "nft.rpc-timeout", 10*time.Second, "deadline of one batch of tokenURI/uri calls to the node")
	fs.DurationVar(&c.SessionTimeout, "nft.session-timeout", 15*time.Second, "consumer group session timeout of the metadata worker")
	c.Fetch.RegisterFlags(fs)
}

func formatSchedule(s []time.Duration) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}

// Validate checks an enabled worker's configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Group == "" || c.DiscoveryGroup == "" {
		errs = append(errs, errors.New("nftworker: --nft.group and --nft.discovery-group are required"))
	}
	if c.DiscoveryStartOffset != "start" && c.DiscoveryStartOffset != "end" {
		errs = append(errs, errors.New("nftworker: --nft.discovery-start-offset must be start or end"))
	}
	if c.DiscoveryCache <= 0 || c.MaxPollRecords <= 0 || c.RPCTimeout <= 0 || c.SessionTimeout <= 0 {
		errs = append(errs, errors.New("nftworker: --nft.discovery-cache, --nft.max-poll-records, --nft.rpc-timeout and --nft.session-timeout must be positive"))
	}
	if len(c.RetrySchedule) != topics.NftMetadataRetryLevels {
		errs = append(errs, fmt.Errorf("nftworker: --nft.retry-schedule needs %d waits (one per retry topic), got %d", topics.NftMetadataRetryLevels, len(c.RetrySchedule)))
	}
	for _, d := range c.RetrySchedule {
		if d <= 0 {
			errs = append(errs, errors.New("nftworker: --nft.retry-schedule waits must be positive"))
			break
		}
	}
	errs = append(errs, c.Fetch.Validate())
	return errors.Join(errs...)
}
