package app

import (
	"errors"
	"flag"
	"time"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/balances"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/process"
	"github.com/moraine-data/moraine/pkg/tokenmeta"
	"github.com/moraine-data/moraine/query/internal/access"
	"github.com/moraine-data/moraine/query/internal/access/plan"
	"github.com/moraine-data/moraine/query/internal/access/usage"
	"github.com/moraine-data/moraine/query/internal/data/api"
	"github.com/moraine-data/moraine/query/internal/data/store"
	"github.com/moraine-data/moraine/query/internal/ops/export"
	"github.com/moraine-data/moraine/query/internal/server/pagetoken"
	"github.com/moraine-data/moraine/query/internal/webhooks"
)

// Config is every setting of the query service; the fields mirror the flags.
type Config struct {
	HTTPListenAddress string
	TrustedProxies    string
	// TrustedProxyList is TrustedProxies split (by Validate).
	TrustedProxyList []string
	// HTTP bounds what one client can hold of the API server.
	HTTP            obs.HTTPConfig
	Ops             obs.OpsConfig
	ChainsFile      string
	ClickHouse      chclient.Config
	ShutdownTimeout time.Duration
	Log             obs.LogConfig
	Store           store.Config
	API             api.Config
	PageToken       pagetoken.Config
	// AccountDB is the account store: accounts, keys, webhooks, secrets.
	AccountDB accountdb.Config
	// Plans are the budgets and limits of each plan.
	Plans plan.Config
	// Access: API keys and rate limits on every request.
	Access access.Config
	// Webhooks: the Webhooks API and the address-watch topic.
	Webhooks webhooks.Config
	// Contracts bounds the eth_calls of contract metadata (token names and
	// decimals of transfers, GET /v1/chains/{chainId}/addresses/{address}).
	Contracts tokenmeta.Config
	// Usage records every /v1 request (package access/usage).
	Usage usage.Config
	// Export runs transaction export jobs (package ops/export).
	Export export.Config
	// Balances: node reads and verification of the balance routes.
	Balances balances.ServeConfig
}

// DefaultConfig mirrors the flag defaults.
func DefaultConfig() Config {
	fs := flag.NewFlagSet("defaults", flag.ContinueOnError)
	var c Config
	c.RegisterFlags(fs)
	return c
}

// RegisterFlags adds every flag of the service.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.HTTPListenAddress, "http.listen-address", "127.0.0.1:8080", "address of the Data API (HTTP)")
	fs.StringVar(&c.TrustedProxies, "http.trusted-proxies", "", "comma-separated proxy IPs/CIDRs whose X-Forwarded-For gives the client IP (none by default)")
	c.HTTP.RegisterFlags(fs)
	c.Ops.RegisterFlags(fs, "127.0.0.1:9103")
	chains.RegisterFlag(fs, &c.ChainsFile)
	c.ClickHouse.RegisterFlags(fs)
	fs.DurationVar(&c.ShutdownTimeout, "shutdown.timeout", 10*time.Second, "how long in-flight requests may finish after a stop signal")
	c.Log.RegisterFlags(fs)
	c.Store.RegisterFlags(fs)
	c.API = api.DefaultConfig()
	fs.DurationVar(&c.API.ChainStaleAfter, "chains.stale-after", c.API.ChainStaleAfter,
		"list a chain as UNAVAILABLE when this process has not seen its indexed head advance for this long (0: never)")
	c.PageToken.RegisterFlags(fs)
	c.AccountDB.RegisterFlags(fs)
	c.Plans.RegisterFlags(fs)
	c.Access.RegisterFlags(fs)
	c.Webhooks.RegisterFlags(fs)
	c.Usage.RegisterFlags(fs)
	c.Export.RegisterFlags(fs)
	c.Contracts = tokenmeta.DefaultConfig()
	fs.IntVar(&c.Contracts.CacheSize, "contracts.cache-size", c.Contracts.CacheSize, "contracts whose metadata (name, symbol, decimals, token standard) is kept in memory, answered by their chain's node through eth_call")
	fs.DurationVar(&c.Contracts.CallTimeout, "contracts.eth-call-timeout", c.Contracts.CallTimeout, "deadline of the eth_calls one request makes to a chain's node for contract metadata")
	c.Balances.RegisterFlags(fs)
}

// Validate checks the settings (without I/O).
func (c *Config) Validate() error {
	var errs []error
	if c.HTTPListenAddress == "" {
		errs = append(errs, errors.New("query: --http.listen-address is required"))
	}
	if c.Ops.ListenAddress == "" {
		errs = append(errs, errors.New("query: --ops.listen-address is required"))
	}
	if c.ChainsFile == "" {
		errs = append(errs, errors.New("query: --chains.file is required"))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("query: --shutdown.timeout must be positive"))
	}
	if c.Contracts.CacheSize <= 0 || c.Contracts.CallTimeout <= 0 {
		errs = append(errs, errors.New("query: --contracts.cache-size and --contracts.eth-call-timeout must be positive"))
	}
	c.TrustedProxyList = process.SplitList(c.TrustedProxies)
	for _, v := range []interface{ Validate() error }{c.HTTP, c.ClickHouse, c.Store, c.API, c.PageToken, c.AccountDB, c.Access, c.Webhooks, c.Balances, c.Usage, c.Export} {
		if err := v.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
