package app

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/obs"
)

// Config is every setting of the ingest service; the fields mirror the flags.
type Config struct {
	ChainsFile string
	// Chains is the comma-separated list of chain ids to ingest; empty
	// means every chain of the file.
	Chains          string
	Kafka           kafkautil.Config
	RPCTimeout      time.Duration
	BatchBlocks     int
	Concurrency     int
	PollInterval    time.Duration
	ReadyLag        uint64
	Window          int
	Ops             obs.OpsConfig
	ShutdownTimeout time.Duration
	Log             obs.LogConfig
	// LeaseGroup, LeaseSessionTimeout: the consumer group that decides which
	// instance writes each chain (package lease).
	LeaseGroup          string
	LeaseSessionTimeout time.Duration
	// MaxLead and LeadGroup bound a backfill's lead over the processor's
	// sink (package follow, lead.go).
	MaxLead   int64
	LeadGroup string
}

// DefaultConfig mirrors the flag defaults.
func DefaultConfig() Config {
	var c Config
	c.RegisterFlags(flag.NewFlagSet("defaults", flag.ContinueOnError))
	return c
}

// RegisterFlags adds every flag of the service.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	chains.RegisterFlag(fs, &c.ChainsFile)
	fs.StringVar(&c.Chains, "ingest.chains", "", "comma-separated EVM chain ids to ingest (default: every chain of --chains.file)")
	c.Kafka.RegisterFlags(fs)
	fs.DurationVar(&c.RPCTimeout, "rpc.timeout", 30*time.Second, "timeout of one JSON-RPC HTTP request (a batch of blocks with traces can take seconds)")
	fs.IntVar(&c.BatchBlocks, "rpc.batch-blocks", 10, "blocks per JSON-RPC batch: each block is 2-3 calls (block, receipts, traces); keep 3x this under the node's batch limit (1000 calls in go-ethereum)")
	fs.IntVar(&c.Concurrency, "ingest.concurrency", 4, "JSON-RPC batches in flight per node of a chain while backfilling (a chain with 3 nodes has 3x this in flight)")
	fs.DurationVar(&c.PollInterval, "ingest.poll-interval", time.Second, "eth_blockNumber polling period of every node (its head, and its health check: a node whose poll fails for 2 polls or 2s is taken out until a poll succeeds)")
	fs.Uint64Var(&c.ReadyLag, "ingest.ready-lag", 2, "ready once every chain's acknowledged blocks are within this many blocks of its head")
	fs.StringVar(&c.LeaseGroup, "ingest.lease-group", "moraine-ingest", "consumer group of the ingest instances: the instance it assigns a chain's lease writes the chain, the others stand by (--kafka.topic-prefix is prepended)")
	fs.DurationVar(&c.LeaseSessionTimeout, "ingest.lease-session-timeout", 6*time.Second, "how long a silent instance keeps its chains before a standby takes them over (at least the broker's group.min.session.timeout.ms, 6 s by default)")
	fs.Int64Var(&c.MaxLead, "ingest.max-lead", 0, "a backfill fetches no new blocks while its chain's partition holds more than this many records that --ingest.lead-group has not committed, so ingest gives way when the processor does (its write budget); 0: no bound. The head never waits")
	fs.StringVar(&c.LeadGroup, "ingest.lead-group", "moraine-processor", "with --ingest.max-lead: the consumer group whose progress bounds the backfill, the processor's sink (--processor.group; --kafka.topic-prefix is prepended)")
	fs.IntVar(&c.Window, "ingest.reorg-window", 256, "recent block hashes kept (and read back from Kafka at start) to find a reorg's common ancestor; at least 128")
	c.Ops.RegisterFlags(fs, "127.0.0.1:9101")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown.timeout", 15*time.Second, "how long fetched blocks may take to be produced and acknowledged after a stop signal")
	c.Log.RegisterFlags(fs)
}

// Validate checks the settings (without I/O).
func (c *Config) Validate() error {
	var errs []error
	if c.ChainsFile == "" {
		errs = append(errs, errors.New("ingest: --chains.file is required"))
	}
	if err := c.Kafka.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.RPCTimeout <= 0 {
		errs = append(errs, errors.New("ingest: --rpc.timeout must be positive"))
	}
	if c.BatchBlocks < 1 || c.BatchBlocks > 1000 {
		errs = append(errs, fmt.Errorf("ingest: --rpc.batch-blocks %d must be within 1..1000", c.BatchBlocks))
	}
	if c.Concurrency < 1 || c.Concurrency > 256 {
		errs = append(errs, fmt.Errorf("ingest: --ingest.concurrency %d must be within 1..256", c.Concurrency))
	}
	if c.PollInterval <= 0 {
		errs = append(errs, errors.New("ingest: --ingest.poll-interval must be positive"))
	}
	if c.Window < 128 {
		errs = append(errs, fmt.Errorf("ingest: --ingest.reorg-window %d must be at least 128", c.Window))
	}
	if c.Ops.ListenAddress == "" {
		errs = append(errs, errors.New("ingest: --ops.listen-address is required"))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("ingest: --shutdown.timeout must be positive"))
	}
	if c.LeaseGroup == "" {
		errs = append(errs, errors.New("ingest: --ingest.lease-group is required"))
	}
	// A bound below two rounds of fetches would hold the backfill after
	// nearly every span.
	if minLead := int64(2 * c.Concurrency * c.BatchBlocks); c.MaxLead != 0 && c.MaxLead < minLead {
		errs = append(errs, fmt.Errorf("ingest: --ingest.max-lead %d must be 0 (no bound) or at least %d (two rounds of --ingest.concurrency x --rpc.batch-blocks): a smaller bound stalls the backfill after every fetch", c.MaxLead, minLead))
	}
	if c.MaxLead > 0 && c.LeadGroup == "" {
		errs = append(errs, errors.New("ingest: --ingest.lead-group is required with --ingest.max-lead"))
	}
	if c.LeaseSessionTimeout < 2*time.Second {
		errs = append(errs, fmt.Errorf("ingest: --ingest.lease-session-timeout %s must be at least 2s (heartbeats are every second)", c.LeaseSessionTimeout))
	}
	return errors.Join(errs...)
}

// selectChains returns the chains to ingest: those listed in --ingest.chains,
// or all of the file.
func (c *Config) selectChains(file *chains.Config) ([]chains.Chain, error) {
	if strings.TrimSpace(c.Chains) == "" {
		if len(file.Chains) == 0 {
			return nil, fmt.Errorf("ingest: %s configures no chain", c.ChainsFile)
		}
		return file.Chains, nil
	}
	var out []chains.Chain
	seen := map[string]bool{}
	for _, id := range strings.Split(c.Chains, ",") {
		id = strings.TrimSpace(id)
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		ch, ok := file.Find(id)
		if !ok {
			return nil, fmt.Errorf("ingest: --ingest.chains: chain %s is not in %s", id, c.ChainsFile)
		}
		out = append(out, ch)
	}
	if len(out) == 0 {
		return nil, errors.New("ingest: --ingest.chains lists no chain")
	}
	return out, nil
}
