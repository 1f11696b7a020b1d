package reconcile

import (
	"errors"
	"flag"
	"time"

	"github.com/moraine-data/moraine/pkg/watch"
)

// Config tunes publishing (watch.Config) and reconciliation.
type Config struct {
	watch.Config
	// ReconcileInterval is the period of the incremental pass.
	ReconcileInterval time.Duration
	// FullReconcileInterval is the period of the full pass (every key).
	FullReconcileInterval time.Duration
	// Lookback is how far back (by row version) the incremental pass looks
	// for address changes; older unpublished rows are found by the full
	// pass, or earlier when this process knows it failed to publish them.
	Lookback time.Duration
	// Grace is how old a row must be before the reconciler publishes it for
	// a writer that has not: younger rows may still be in flight.
	Grace time.Duration
}

// DefaultConfig mirrors the flag defaults.
func DefaultConfig() Config {
	return Config{
		Config:                watch.DefaultConfig(),
		ReconcileInterval:     5 * time.Second,
		FullReconcileInterval: 10 * time.Minute,
		Lookback:              10 * time.Minute,
		Grace:                 2 * time.Second,
	}
}

// RegisterFlags adds the --watch.* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	c.Config.RegisterFlags(fs)
	fs.DurationVar(&c.ReconcileInterval, "watch.reconcile-interval", d.ReconcileInterval, "period of the incremental ClickHouse-to-topic reconciliation")
	fs.DurationVar(&c.FullReconcileInterval, "watch.full-reconcile-interval", d.FullReconcileInterval, "period of the full reconciliation (every webhook, address and account)")
	fs.DurationVar(&c.Lookback, "watch.lookback", d.Lookback, "how far back the incremental reconciliation looks for address changes")
	fs.DurationVar(&c.Grace, "watch.grace", d.Grace, "age a change must reach before the reconciler publishes it for its writer")
}

// Validate checks the values.
func (c Config) Validate() error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	switch {
	case c.ReconcileInterval <= 0:
		return errors.New("reconcile: --watch.reconcile-interval must be positive")
	case c.FullReconcileInterval < c.ReconcileInterval:
		return errors.New("reconcile: --watch.full-reconcile-interval must not be below --watch.reconcile-interval")
	case c.Lookback < c.ReconcileInterval:
		return errors.New("reconcile: --watch.lookback must not be below --watch.reconcile-interval")
	case c.Grace < 0:
		return errors.New("reconcile: --watch.grace must not be negative")
	}
	return nil
}
