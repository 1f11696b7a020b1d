// Command moraine-admin is the operator's tool for accounts, plans and API
// keys. It writes ClickHouse directly; running query instances pick changes
// up within their key-cache TTL (5 s by default).
//
//	moraine-admin account create --name NAME --plan free|base|growth|pro|enterprise|custom
//	moraine-admin account list                (with each account's active webhooks)
//	moraine-admin account set-plan --account ID --plan PLAN
//	moraine-admin key create --account ID [--operator]  (prints the key once; only its SHA-256 is stored)
//	moraine-admin key list --account ID
//	moraine-admin key revoke --key-id ID
//	moraine-admin key set-operator --key-id ID [--operator=false]
//	moraine-admin usage [--org ID] [--from DAY] [--to DAY] [--interval daily] [--group-by requestPath]
//	moraine-admin plan list [--plans.file FILE]
//	moraine-admin dev-key --out PATH [--plan free]   (make run: reuse or create the development key)
//	moraine-admin status [--sample 5s] [--watch 10s]  (every chain's heads, lag, rate and ETA; consumer groups' lag)
//	moraine-admin nft discover --chain ID [--from N] [--to M]  (ask the NFT metadata worker for the NFTs of indexed blocks)
//
// Every subcommand takes the --clickhouse.* flags (status also --kafka.*
// and --chains.file); flags not given fall back to MORAINE_* environment
// variables (MORAINE_CLICKHOUSE_ADDR, ...).
// Scriptable output (ids, keys) goes to stdout, explanations to stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/process"
	"github.com/moraine-data/moraine/query/internal/access/plan"
	"github.com/moraine-data/moraine/query/internal/access/usage/usageapi"
	"github.com/moraine-data/moraine/query/internal/ops/admin"
	"github.com/moraine-data/moraine/query/internal/ops/nftdiscover"
	"github.com/moraine-data/moraine/query/internal/ops/status"
	"github.com/moraine-data/moraine/schemas/topics"
)

const usage = `usage: moraine-admin <command> [flags]

commands:
  account create --name NAME --plan PLAN   create an account (prints its id)
  account list                             list accounts (with their active webhooks, what the plan limits)
  account set-plan --account ID --plan PLAN
  key create --account ID [--operator]     create an API key (prints it once); --operator: it reads every
                                           account's usage and request logs (getApiUsageMetrics, getApiLogs)
  key list --account ID                    list an account's keys (prefix, created, revoked, operator)
  key revoke --key-id ID                   revoke a key (effective within the query key-cache TTL)
  key set-operator --key-id ID [--operator=false]
                                           make a key an operator key, or an ordinary one again
  usage [--org ID] [--from DAY] [--to DAY] [--interval daily] [--group-by FIELD]
                                           requests, success rate, median time and compute units per
                                           interval (every account, or --org's), as getApiUsageMetrics
  plan list [--plans.file FILE]            show plan limits
  dev-key --out PATH [--plan PLAN]         print the development key saved at PATH, creating it if needed
  status [--sample 5s] [--watch 10s]       per chain: node head, ingested (Kafka) and indexed (ClickHouse) heads,
                                           blocks behind, lag, rate and ETA; per node: head, behind, latency,
                                           share of the calls, error rate, verification failures
                                           (--status.ingest-metrics); every consumer group's lag
                                           (also takes --kafka.brokers, --kafka.topic-prefix, --chains.file)
  nft discover --chain ID [--from N] [--to M]
                                           ask the processor's NFT metadata worker for every NFT the indexed
                                           blocks' transfer logs show (blocks older than the blocks topic, or
                                           indexed with --nft.enabled=false); idempotent (also takes --kafka.*)

plans: free, base, growth, pro, enterprise, custom
every command takes --clickhouse.addr, --clickhouse.database, ... (env MORAINE_CLICKHOUSE_ADDR, ...)
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command; it returns the exit code (2: usage).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		return 2
	}
	name := args[0]
	rest := args[1:]
	if (name == "account" || name == "key" || name == "plan" || name == "nft") && len(rest) > 0 {
		name += " " + rest[0]
		rest = rest[1:]
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "moraine-admin: unknown command %q\n\n%s", name, usage)
		return 2
	}
	e := &env{stdout: stdout, stderr: stderr}
	fs := flag.NewFlagSet("moraine-admin "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	if cmd.db {
		e.ch.RegisterFlags(fs)
	}
	run := cmd.setup(fs, e)
	if err := process.ParseWithEnv(fs, rest, "MORAINE"); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 2
		}
		fmt.Fprintln(stderr, "moraine-admin:", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "moraine-admin %s: unexpected arguments %q\n", name, fs.Args())
		return 2
	}
	for _, f := range cmd.required {
		if fs.Lookup(f).Value.String() == "" {
			fmt.Fprintf(stderr, "moraine-admin %s: --%s is required\n", name, f)
			return 2
		}
	}
	if cmd.db {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		conn, err := chclient.Open(cctx, e.ch, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
		cancel()
		if err != nil {
			fmt.Fprintln(stderr, "moraine-admin:", err)
			return 1
		}
		defer conn.Close()
		db, err := accountdb.Open(conn, accountdb.DefaultConfig(), nil)
		if err != nil {
			fmt.Fprintln(stderr, "moraine-admin:", err)
			return 1
		}
		e.admin = &admin.Admin{DB: db, Clock: accountdb.NewClock(nil)}
		e.conn = conn
	}
	if err := run(ctx); err != nil {
		fmt.Fprintf(stderr, "moraine-admin %s: %v\n", name, err)
		return 1
	}
	return 0
}

// planFlag is a flag whose value must name a plan: a wrong one is a usage
// error when the flags are parsed, before any connection is made.
type planFlag string

func (p *planFlag) String() string { return string(*p) }

func (p *planFlag) Set(v string) error {
	if !plan.Valid(v) {
		return admin.ErrBadPlan
	}
	*p = planFlag(v)
	return nil
}

type env struct {
	ch     chclient.Config
	conn   driver.Conn
	admin  *admin.Admin
	stdout io.Writer
	stderr io.Writer
}

// command is one subcommand: setup defines its flags and returns what it
// runs once they are parsed and, with db, ClickHouse is connected.
type command struct {
	db bool
	// required are flags that must not be empty; they are checked before
	// the connection is made, as a usage error.
	required []string
	setup    func(fs *flag.FlagSet, e *env) func(ctx context.Context) error
}

func ms(v uint64) string {
	if v == 0 {
		return "-"
	}
	return time.UnixMilli(int64(v)).UTC().Format(time.RFC3339)
}

var commands = map[string]command{
	"account create": {db: true, required: []string{"name"}, setup: func(fs *flag.FlagSet, e *env) func(context.Context) error {
		name := fs.String("name", "", "account name")
		pl := planFlag(plan.Free)
		fs.Var(&pl, "plan", "plan: free, base, growth, pro, enterprise or custom")
		return func(ctx context.Context) error {
			a, err := e.admin.CreateAccount(ctx, *name, string(pl))
			if err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, a.ID)
			fmt.Fprintf(e.stderr, "created account %s (%s) on plan %s\n", a.ID, a.Name, a.Plan)
			return nil
		}
	}},
	"account list": {db: true, setup: func(fs *flag.FlagSet, e *env) func(context.Context) error {
		return func(ctx context.Context) error {
			accs, err := e.admin.Accounts(ctx)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			// ACTIVE WEBHOOKS is what the plan's webhooksPerAccount limits
			// (plan list); inactive webhooks do not count.
			fmt.Fprintln(tw, "ID\tNAME\tPLAN\tACTIVE WEBHOOKS\tCREATED")
			for _, a := range accs {
				n, err := e.admin.ActiveWebhooks(ctx, a.ID)
				if err != nil {
					return err
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", a.ID, a.Name, a.Plan, n, ms(a.CreatedAt))
			}
			return tw.Flush()
		}
	}},
	"account set-plan": {db: true, required: []string{"account", "plan"}, setup: func(fs *flag.FlagSet, e *env) func(context.Context) error {
		id := fs.String("account", "", "account id")
		var pl planFlag
		fs.Var(&pl, "plan", "new plan")
		return func(ctx context.Context) error {
			a, err := e.admin.SetPlan(ctx, *id, string(pl))
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "account %s is now on plan %s (query instances apply it within their key-cache TTL)\n", a.ID, a.Plan)
			return nil
		}
	}},
	"key create": {db: true, required: []string{"account"}, setup: func(fs *flag.FlagSet, e *env) func(context.Context) error {
		id := fs.String("account", "", "account id")
		operator := fs.Bool("operator", false, "an operator key: it reads every account's usage and request logs")
		return func(ctx context.Context) error {
			k, err := e.admin.CreateKey(ctx, *id)
			if err != nil {
				return err
			}
			if *operator {
				if err := e.admin.SetOperator(ctx, k.ID, true); err != nil {
					return err
				}
			}
			fmt.Fprintln(e.stdout, k.Key)
			fmt.Fprintf(e.stderr, "created key %s (prefix %s) for account %s. This is the only time the key is shown: only its SHA-256 is stored.\n", k.ID, k.Prefix, *id)
			return nil
		}
	}},
	"key list": {db: true, required: []string{"account"}, setup: func(fs *flag.FlagSet, e *env) func(context.Context) error {
		id := fs.String("account", "", "account id")
		return func(ctx context.Context) error {
			ks, err := e.admin.Keys(ctx, *id)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY ID\tPREFIX\tCREATED\tREVOKED\tOPERATOR")
			for _, k := range ks {
				op, err := e.admin.IsOperator(ctx, k.ID)
				if err != nil {
					return err
				}
				fmt.Fprintf(tw, "%s\t%s…\t%s\t%s\t%s\n", k.ID, k.Prefix, ms(k.CreatedAt), ms(k.RevokedAt), yesNo(op))
			}
			return tw.Flush()
		}
	}},
	"key revoke": {db: true, required: []string{"key-id"}, setup: func(fs *flag.FlagSet, e *env) func(context.Context) error {
		id := fs.String("key-id", "", "key id (from key list)")
		return func(ctx context.Context) error {
			k, err := e.admin.RevokeKey(ctx, *id)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "key %s revoked at %s (query instances refuse it within their key-cache TTL)\n", k.ID, ms(k.RevokedAt))
			return nil
		}
	}},
	"key set-operator": {db: true, required: []string{"key-id"}, setup: func(fs *flag.FlagSet, e *env) func(context.Context) error {
		id := fs.String("key-id", "", "key id (from key list)")
		operator := fs.Bool("operator", true, "true: the key reads every account's usage and request logs; false: its own account's")
		return func(ctx context.Context) error {
			if err := e.admin.SetOperator(ctx, *id, *operator); err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "key %s: operator %s (query instances apply it within their key-cache TTL)\n", *id, yesNo(*operator))
			return nil
		}
	}},
	"usage": {db: true, setup: usageCommand},
	"plan list": {setup: func(fs *flag.FlagSet, e *env) func(context.Context) error {
		var pc plan.Config
		pc.RegisterFlags(fs)
		return func(context.Context) error {
			ps, err := pc.Load()
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "PLAN\tCU/MINUTE\tCU/DAY\tADDRESSES/WEBHOOK\tWEBHOOKS/ACCOUNT\tBLOCKS/REPLAY\tREPLAY MESSAGES/S\t")
			for _, p := range ps.All() {
				addr, hooks := fmt.Sprint(p.AddressesPerWebhook), fmt.Sprint(p.WebhooksPerAccount)
				blocks, rate := fmt.Sprint(p.ReplayBlocks), fmt.Sprint(p.ReplayMessagesPerSecond)
				if p.Name == plan.Unauthenticated {
					addr, hooks, blocks, rate = "-", "-", "-", "-"
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t\n", p.Name, p.CUPerMinute, p.CUPerDay, addr, hooks, blocks, rate)
			}
			return tw.Flush()
		}
	}},
	"status":       {db: true, setup: statusCommand},
	"nft discover": {db: true, setup: nftDiscoverCommand},
	"dev-key": {db: true, setup: func(fs *flag.FlagSet, e *env) func(context.Context) error {
		out := fs.String("out", defaultDevKeyPath(), "file holding the development key")
		pl := planFlag(plan.Free)
		fs.Var(&pl, "plan", "plan of the development account when it is created")
		return func(ctx context.Context) error {
			key, created, err := e.admin.DevKey(ctx, *out, string(pl))
			if err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, key)
			if created {
				fmt.Fprintf(e.stderr, "created the development API key; saved in %s\n", *out)
			}
			return nil
		}
	}},
}

// statusCommand is `moraine-admin status`: two snapshots --sample apart,
// rendered with the rates between them; with --watch, a new one every
// interval, its rates over that interval.
// nftDiscoverCommand is `nft discover`: package nftdiscover.
func nftDiscoverCommand(fs *flag.FlagSet, e *env) func(context.Context) error {
	var kc kafkautil.Config
	kc.RegisterFlags(fs)
	chain := fs.Uint64("chain", 0, "EVM chain id")
	from := fs.Uint64("from", 0, "first block")
	to := fs.Uint64("to", 0, "last block (0: the chain's indexed head)")
	return func(ctx context.Context) error {
		if *chain == 0 {
			return errors.New("--chain is required")
		}
		logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		cl, err := kafkautil.NewClient(cctx, logger, append(kc.ProducerOpts(logger, "moraine-admin-nft-discover"),
			kgo.DefaultProduceTopic(kc.Topic(topics.NftMetadata)))...)
		cancel()
		if err != nil {
			return err
		}
		defer cl.Close()
		res, err := nftdiscover.Run(ctx, e.conn, cl, nftdiscover.Options{ChainID: *chain, From: *from, To: *to,
			Progress: func(r nftdiscover.Result) {
				fmt.Fprintf(e.stderr, "through block %d: %d transfer logs, %d requests\n", r.Through, r.Logs, r.Requests)
			}})
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%d\n", res.Requests)
		fmt.Fprintf(e.stderr, "asked the metadata worker for %d NFTs of blocks %d..%d (it skips those it has)\n", res.Requests, *from, res.Through)
		return nil
	}
}

func statusCommand(fs *flag.FlagSet, e *env) func(context.Context) error {
	var kc kafkautil.Config
	kc.RegisterFlags(fs)
	var chainsFile string
	chains.RegisterFlag(fs, &chainsFile)
	sample := fs.Duration("sample", 5*time.Second, "time between the two snapshots that give rates and ETA (0: one snapshot, no rates)")
	watch := fs.Duration("watch", 0, "print a new view every this often until interrupted (0: once)")
	ingestMetrics := fs.String("status.ingest-metrics", "http://127.0.0.1:9101/metrics",
		"comma-separated /metrics URLs of the ingest instances: each node's share of the calls, error rate and verification failures (empty: not shown)")
	processorMetrics := fs.String("status.processor-metrics", "http://127.0.0.1:9102/metrics",
		"comma-separated /metrics URLs of the processor instances: each one's write budget, whether backfill gives way to reads or head blocks and why (empty: not shown)")
	return func(ctx context.Context) error {
		cc, err := chains.Load(chainsFile)
		if err != nil {
			return err
		}
		logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		cl, err := kafkautil.NewClient(cctx, logger, kc.BaseOpts(logger, "moraine-admin-status")...)
		cancel()
		if err != nil {
			return err
		}
		defer cl.Close()
		src := status.Source{Chains: cc.Chains, Kafka: kc, Client: cl, Conn: e.conn, IngestMetrics: process.SplitList(*ingestMetrics),
			ProcessorMetrics: process.SplitList(*processorMetrics)}
		var prev *status.Snapshot
		if *sample > 0 {
			s := status.Take(ctx, src)
			prev = &s
			if !obs.Sleep(ctx, *sample) {
				return nil
			}
		}
		for {
			cur := status.Take(ctx, src)
			fmt.Fprintf(e.stdout, "%s\n", cur.At.UTC().Format(time.RFC3339))
			if err := status.Render(e.stdout, prev, cur); err != nil {
				return err
			}
			if *watch <= 0 {
				return nil
			}
			prev = &cur
			fmt.Fprintln(e.stdout)
			if !obs.Sleep(ctx, *watch) {
				return nil
			}
		}
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// usageCommand is `moraine-admin usage`: what getApiUsageMetrics answers an
// operator key, without one, as a table.
func usageCommand(fs *flag.FlagSet, e *env) func(context.Context) error {
	org := fs.String("org", "", "account id (empty: every account; \"none\": keyless requests)")
	today := time.Now().UTC().Format(time.DateOnly)
	from := fs.String("from", time.Now().UTC().AddDate(0, 0, -6).Format(time.DateOnly), "first day (UTC), YYYY-MM-DD")
	to := fs.String("to", today, "last day (UTC, included), YYYY-MM-DD")
	interval := fs.String("interval", "daily", "minute, hourly, daily, weekly or monthly")
	groupBy := fs.String("group-by", "", "requestPath, responseCode, chainId, apiKeyId or requestType (empty: none)")
	return func(ctx context.Context) error {
		f, err := time.Parse(time.DateOnly, *from)
		if err != nil {
			return fmt.Errorf("--from: %w", err)
		}
		t, err := time.Parse(time.DateOnly, *to)
		if err != nil {
			return fmt.Errorf("--to: %w", err)
		}
		account := *org
		if account == "none" {
			account = ""
		}
		rows, err := usageapi.ReadMetrics(ctx, e.conn, time.Minute, account, *org == "", f, t.AddDate(0, 0, 1), *interval, *groupBy)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TIME\tGROUP\tREQUESTS\tSUCCESS %\tMEDIAN MS\tINVALID\tCU\tCU WASTED")
		for _, r := range rows {
			group := r.Group
			if *groupBy == "" {
				group = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%.2f\t%d\t%d\t%d\n", r.Start.Format(time.RFC3339), group, r.Requests,
				100*float64(r.OK)/float64(max(r.Requests, 1)), r.MedianMs, r.Invalid, r.Units, r.Wasted)
		}
		return tw.Flush()
	}
}

// defaultDevKeyPath is $MORAINE_STATE_DIR/dev-api-key (.moraine without it).
func defaultDevKeyPath() string {
	dir := os.Getenv("MORAINE_STATE_DIR")
	if dir == "" {
		dir = ".moraine"
	}
	return filepath.Join(dir, "dev-api-key")
}
