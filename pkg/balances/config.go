package balances

import (
	"errors"
	"flag"
	"time"
)

// ServeConfig tunes what the query service does for the balance routes
// (its --balances.* flags).
type ServeConfig struct {
	// NodeTimeout bounds the node reads of one request: a native balance,
	// or the opening balances a read needs.
	NodeTimeout time.Duration
	// NativeCacheSize is how many native balances of settled blocks are
	// remembered.
	NativeCacheSize int
	// DirectoryPairs and DirectoryHolderPairs size what the reader
	// remembers of holders (Reader.Remember: directories and summed
	// states): pairs in all, and the most of one holder.
	DirectoryPairs, DirectoryHolderPairs int
	// Verify is the verifier's configuration.
	Verify VerifierConfig
}

// RegisterFlags adds the --balances.* flags.
func (c *ServeConfig) RegisterFlags(fs *flag.FlagSet) {
	fs.DurationVar(&c.NodeTimeout, "balances.node-timeout", 2*time.Second, "deadline of the node reads of one balance request (eth_getBalance, and the balanceOf calls of opening balances on a chain indexed from a later block)")
	fs.IntVar(&c.NativeCacheSize, "balances.native-cache-size", 100_000, "native balances of settled blocks (below the head by --query.reorg-window) kept in memory")
	fs.IntVar(&c.DirectoryPairs, "balances.directory-cache-pairs", 1_000_000, "(holder, token, token id) pairs of holders' directories (73 bytes each) and of their summed balances (about 120 bytes each) kept in memory, each up to this many: the next pages of a list under the same indexed head skip reading the directory, and a page at the head reads only the balance changes since the last summed bucket (0: none)")
	fs.IntVar(&c.DirectoryHolderPairs, "balances.directory-holder-pairs", 100_000, "largest directory (and summed balances) of one holder kept in memory; a larger one's pages read it a window at a time")
	fs.DurationVar(&c.Verify.Interval, "balances.verify-interval", time.Minute, "how often the verifier compares a sample of served balances with the chains' nodes at the same block (0: never)")
	fs.IntVar(&c.Verify.Samples, "balances.verify-samples", 20, "(holder, token) pairs the verifier checks per chain and round, and the native balances of their holders")
	fs.Uint64Var(&c.Verify.Depth, "balances.verify-depth", 1024, "how far below the indexed head the verifier checks: at least ingest's --ingest.reorg-window, so both sides talk about the same block")
}

// Validate checks the values.
func (c ServeConfig) Validate() error {
	var errs []error
	if c.NodeTimeout <= 0 {
		errs = append(errs, errors.New("balances: --balances.node-timeout must be positive"))
	}
	if c.NativeCacheSize <= 0 {
		errs = append(errs, errors.New("balances: --balances.native-cache-size must be positive"))
	}
	if c.DirectoryPairs < 0 || c.DirectoryHolderPairs < 0 {
		errs = append(errs, errors.New("balances: --balances.directory-cache-pairs and --balances.directory-holder-pairs must not be negative"))
	}
	if c.Verify.Interval < 0 || c.Verify.Samples <= 0 {
		errs = append(errs, errors.New("balances: --balances.verify-interval must not be negative and --balances.verify-samples must be positive"))
	}
	return errors.Join(errs...)
}
