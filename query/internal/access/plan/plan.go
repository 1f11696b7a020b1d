// Package plan holds the account plans: compute-unit budgets per minute and
// per day (CONTRACT.md section 7.1), addresses per webhook and webhooks per
// account (section 7.2).
//
// The built-in defaults follow the hosted service where it publishes
// numbers (unauthenticated 6,000 CU/min and 1,200,000 CU/day; free 8,000 and
// 2,000,000; base 10,000 and 3,750,000; growth 14,000 and 11,200,000; pro
// 20,000 and 25,000,000; free: 5 addresses per webhook). Everything else is
// unpublished, so the defaults are moraine's choice and configurable:
//
//	plan        CU/min   CU/day       addresses/webhook  webhooks/account  transactions/export
//	enterprise  100,000  100,000,000  100,000            1,000             2,000,000
//	custom      100,000  100,000,000  100,000            1,000             2,000,000
//	pro         -        -            1,000              100               1,000,000
//	growth      -        -            100                50                200,000
//	base        -        -            25                 25                50,000
//	free        -        -            5                  10                10,000
//
// Webhook replays (a moraine extension, docs/webhook-stream.md) are
// bounded by the plan too: the blocks one replay may cover, and the
// messages per second it is delivered at:
//
//	plan        blocks/replay  messages/s
//	enterprise  100,000,000    2,000
//	custom      100,000,000    2,000
//	pro         10,000,000     500
//	growth      1,000,000      100
//	base        100,000        50
//	free        10,000         20
//
// --plans.file names a JSON file whose entries replace the defaults of the
// plans they name, field by field (moraine-admin plan list shows the result):
//
//	{"plans": {"enterprise": {"cuPerMinute": 100000, "cuPerDay": 100000000},
//	           "base": {"addressesPerWebhook": 50}}}
//
// The pseudo-plan "unauthenticated" is the keyless tier (its address and
// webhook limits are unused: webhooks need a key).
package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
)

// Plan names.
const (
	Unauthenticated = "unauthenticated"
	Free            = "free"
	Base            = "base"
	Growth          = "growth"
	Pro             = "pro"
	Enterprise      = "enterprise"
	Custom          = "custom"
)

// Names are the plans an account can have, cheapest first.
var Names = []string{Free, Base, Growth, Pro, Enterprise, Custom}

// Plan is one plan's limits.
type Plan struct {
	Name string `json:"-"`
	// CUPerMinute and CUPerDay are compute-unit budgets (0: unlimited).
	CUPerMinute int64 `json:"cuPerMinute"`
	CUPerDay    int64 `json:"cuPerDay"`
	// AddressesPerWebhook caps one webhook's addresses.
	AddressesPerWebhook int `json:"addressesPerWebhook"`
	// WebhooksPerAccount caps an account's active webhooks (inactive ones,
	// deleted or deactivated by delivery, do not count).
	WebhooksPerAccount int `json:"webhooksPerAccount"`
	// ReplayBlocks caps the blocks one webhook replay covers;
	// ReplayMessagesPerSecond paces its delivery.
	ReplayBlocks            uint64 `json:"replayBlocks"`
	ReplayMessagesPerSecond uint32 `json:"replayMessagesPerSecond"`
	// ExportTransactions caps the transactions of one export job
	// (postTransactionExportJob); a larger export stops at a day boundary
	// (WarnTruncatedExport, nextDate).
	ExportTransactions int `json:"exportTransactions"`
}

// Set is every plan.
type Set struct {
	plans map[string]Plan
}

// Defaults returns the built-in plans.
func Defaults() *Set {
	p := map[string]Plan{
		Unauthenticated: {CUPerMinute: 6_000, CUPerDay: 1_200_000},
		Free: {CUPerMinute: 8_000, CUPerDay: 2_000_000, AddressesPerWebhook: 5, WebhooksPerAccount: 10,
			ReplayBlocks: 10_000, ReplayMessagesPerSecond: 20, ExportTransactions: 10_000},
		Base: {CUPerMinute: 10_000, CUPerDay: 3_750_000, AddressesPerWebhook: 25, WebhooksPerAccount: 25,
			ReplayBlocks: 100_000, ReplayMessagesPerSecond: 50, ExportTransactions: 50_000},
		Growth: {CUPerMinute: 14_000, CUPerDay: 11_200_000, AddressesPerWebhook: 100, WebhooksPerAccount: 50,
			ReplayBlocks: 1_000_000, ReplayMessagesPerSecond: 100, ExportTransactions: 200_000},
		Pro: {CUPerMinute: 20_000, CUPerDay: 25_000_000, AddressesPerWebhook: 1_000, WebhooksPerAccount: 100,
			ReplayBlocks: 10_000_000, ReplayMessagesPerSecond: 500, ExportTransactions: 1_000_000},
		Enterprise: {CUPerMinute: 100_000, CUPerDay: 100_000_000, AddressesPerWebhook: 100_000, WebhooksPerAccount: 1_000,
			ReplayBlocks: 100_000_000, ReplayMessagesPerSecond: 2_000, ExportTransactions: 2_000_000},
		Custom: {CUPerMinute: 100_000, CUPerDay: 100_000_000, AddressesPerWebhook: 100_000, WebhooksPerAccount: 1_000,
			ReplayBlocks: 100_000_000, ReplayMessagesPerSecond: 2_000, ExportTransactions: 2_000_000},
	}
	s := &Set{plans: map[string]Plan{}}
	for n, pl := range p {
		pl.Name = n
		s.plans[n] = pl
	}
	return s
}

// Get returns the named plan.
func (s *Set) Get(name string) (Plan, bool) {
	p, ok := s.plans[name]
	return p, ok
}

// GetOrFree returns the named plan, or for an unknown name (an account row
// written with a plan this deployment no longer has) the free plan's limits
// under that name, so that no account is unlimited by accident. It never
// fails.
func (s *Set) GetOrFree(name string) Plan {
	if p, ok := s.plans[name]; ok {
		return p
	}
	p := s.plans[Free]
	p.Name = name
	return p
}

// All returns the plans in Names order, the unauthenticated tier first.
func (s *Set) All() []Plan {
	out := []Plan{s.plans[Unauthenticated]}
	for _, n := range Names {
		out = append(out, s.plans[n])
	}
	return out
}

// Valid reports whether name is an account plan.
func Valid(name string) bool {
	for _, n := range Names {
		if n == name {
			return true
		}
	}
	return false
}

// Config names the plans file.
type Config struct {
	File string
}

// RegisterFlags adds --plans.file.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.File, "plans.file", "", "JSON file overriding plan limits, e.g. {\"plans\":{\"enterprise\":{\"cuPerMinute\":100000}}} (empty: built-in defaults)")
}

// Load returns the defaults with the file's overrides applied.
func (c Config) Load() (*Set, error) {
	s := Defaults()
	if c.File == "" {
		return s, nil
	}
	b, err := os.ReadFile(c.File)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	return s, s.apply(b)
}

// Parse returns the defaults with the overrides of a plans file's contents.
func Parse(b []byte) (*Set, error) {
	s := Defaults()
	return s, s.apply(b)
}

func (s *Set) apply(b []byte) error {
	var file struct {
		Plans map[string]json.RawMessage `json:"plans"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	names := make([]string, 0, len(file.Plans))
	for n := range file.Plans {
		names = append(names, n)
	}
	sort.Strings(names)
	var errs []error
	for _, n := range names {
		p, ok := s.plans[n]
		if !ok {
			errs = append(errs, fmt.Errorf("plan: unknown plan %q (plans: unauthenticated, free, base, growth, pro, enterprise, custom)", n))
			continue
		}
		d := json.NewDecoder(bytes.NewReader(file.Plans[n]))
		d.DisallowUnknownFields()
		if err := d.Decode(&p); err != nil {
			errs = append(errs, fmt.Errorf("plan %s: %w", n, err))
			continue
		}
		if p.CUPerMinute < 0 || p.CUPerDay < 0 || p.AddressesPerWebhook < 0 || p.WebhooksPerAccount < 0 || p.ExportTransactions < 0 {
			errs = append(errs, fmt.Errorf("plan %s: limits must not be negative", n))
		}
		if n != Unauthenticated && (p.AddressesPerWebhook == 0 || p.WebhooksPerAccount == 0 || p.ReplayBlocks == 0 || p.ReplayMessagesPerSecond == 0 || p.ExportTransactions == 0) {
			errs = append(errs, fmt.Errorf("plan %s: addressesPerWebhook, webhooksPerAccount, replayBlocks, replayMessagesPerSecond and exportTransactions must be positive", n))
		}
		p.Name = n
		s.plans[n] = p
	}
	return errors.Join(errs...)
}
