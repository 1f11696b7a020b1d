package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/query/internal/access/auth"
)

// UsageConfig describes the synthetic request log SeedUsage writes.
//
// Requests spread evenly over Days days ending at End, over Accounts
// accounts named "bench-acc-NNNN", skewed as real traffic is: account k
// gets the requests whose uniform draw u (of cityHash64) has
// floor(Accounts * u^3) = k, so bench-acc-0000 sends about a fifth of them
// and most accounts a handful a day; every account has two keys. Routes are
// 12 of the API's with their weights (blocks and transactions most), chains
// three, statuses 92% 200, 3% 400, 2% 404, 2% 429 (0 CU) and 1% 503;
// durations 0.5 to 20 ms. The materialized views fill the rollups as the
// rows go in, as the usage sink's inserts do.
type UsageConfig struct {
	Requests, Accounts, Days uint64
	End                      time.Time
	// Chunk is the rows per INSERT ... SELECT (default 1,000,000).
	Chunk uint64
}

// UsageKeys are API keys of the seeded accounts.
type UsageKeys struct {
	// Heavy, Median and Light are keys of bench-acc-0000 (the most
	// requests), of the account at Accounts/10 and at Accounts*9/10.
	Heavy, Median, Light string
	// Operator is an operator key (of the account bench-operators).
	Operator string
}

// usageRows are the seeded requests; parameters: accounts, the first
// millisecond, the milliseconds per request, then numbers(offset, count).
const usageRows = `INSERT INTO api_requests (account_id, at, request_id, key_id, key_alias, route, operation, method, chain_id,
    status, duration_us, compute_units, client_ip, user_agent, host, region, kafka_partition, kafka_offset)
SELECT acc, at, toFixedString(substring(SHA256(toString(number)), 1, 16), 16), concat(acc, '-key-', toString(number % 2)),
    concat('mk_', substring(hex(SHA256(acc)), 1, 8)),
    transform(r, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], ['/v1/chains/:chainId/blocks', '/v1/chains/:chainId/blocks/:blockId',
        '/v1/chains/:chainId/transactions/:txHash', '/v1/chains/:chainId/addresses/:address/transactions',
        '/v1/chains/:chainId/blocks/:blockId/transactions', '/v1/chains', '/v1/blocks',
        '/v1/chains/:chainId/addresses/:address/transactions:listErc20', '/v1/webhooks', '/v1/chains/:chainId/tokens/:address/transfers',
        '/v1/chains/:chainId', 'unmatched'], ''),
    transform(r, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10], ['getLatestBlocks', 'getBlock', 'getTransaction', 'listTransactions',
        'getTransactionsForBlock', 'supportedChains', 'listLatestBlocksAllChains', 'listErc20Transactions', 'listWebhooks',
        'listTransfers', 'getChainInfo'], ''),
    'GET', if(r IN (5, 6, 8, 11), '', transform(toUInt8(cityHash64(number, 3) % 3), [0, 1, 2], ['43114', '43113', '4337'], '')),
    status, toUInt64(500 + cityHash64(number, 4) % 19500),
    if(status = 429, toUInt32(0), transform(r, [0, 1, 5, 8, 10, 11], [10, 10, 1, 10, 1, 1], toUInt32(20))),
    concat('198.51.100.', toString(cityHash64(acc) % 250)), 'bench-agent/1.0', 'api.bench.example', 'bench',
    toUInt32(number % 8), intDiv(number, 8)
FROM (
    SELECT number, toUInt64(? + number * ?) AS at,
        toString(toUInt64(pow((cityHash64(number, 1) % 1000000) / 1000000, 3) * ?)) AS k,
        concat('bench-acc-', substring('0000', 1, 4 - length(k)), k) AS acc,
        toUInt8(multiIf(h < 30, 0, h < 55, 1, h < 65, 2, h < 75, 3, h < 82, 4, h < 87, 5, h < 91, 6, h < 94, 7, h < 96, 8, h < 98, 9, h < 99, 10, 11)) AS r,
        toUInt16(multiIf(s < 920, 200, s < 950, 400, s < 970, 404, s < 990, 429, 503)) AS status
    FROM (SELECT number, cityHash64(number, 2) % 100 AS h, cityHash64(number, 5) % 1000 AS s FROM numbers(?, ?))
)`

// usageAccounts writes the accounts "bench-acc-0000".. on plan free.
const usageAccounts = `INSERT INTO accounts (id, name, plan, created_at, version)
SELECT concat('bench-acc-', substring('0000', 1, 4 - length(toString(number))), toString(number)),
    concat('bench account ', toString(number)), 'free', 1, 1
FROM numbers(?)`

// SeedUsage writes c's request log and accounts, and keys to read it.
func SeedUsage(ctx context.Context, conn driver.Conn, c UsageConfig, logger *slog.Logger) (UsageKeys, error) {
	if c.Requests == 0 || c.Accounts == 0 || c.Accounts > 10_000 || c.Days == 0 {
		return UsageKeys{}, errors.New("bench: Requests, Accounts (at most 10,000) and Days must be positive")
	}
	if c.Chunk == 0 {
		c.Chunk = 1_000_000
	}
	ectx, cancel := context.WithTimeout(ctx, time.Minute)
	err := conn.Exec(ectx, usageAccounts, c.Accounts)
	cancel()
	if err != nil {
		return UsageKeys{}, fmt.Errorf("bench: seed accounts: %w", err)
	}
	span := c.Days * 24 * uint64(time.Hour/time.Millisecond)
	first := uint64(c.End.UnixMilli()) - span
	step := max(span/c.Requests, 1)
	start := time.Now()
	for off := uint64(0); off < c.Requests; off += c.Chunk {
		n := min(c.Chunk, c.Requests-off)
		cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		err := conn.Exec(cctx, usageRows, first, step, c.Accounts, off, n)
		cancel()
		if err != nil {
			return UsageKeys{}, fmt.Errorf("bench: seed requests %d..%d: %w", off, off+n, err)
		}
		logger.Info("seeded requests", "rows", off+n, "of", c.Requests, "elapsed", time.Since(start).Round(time.Millisecond))
	}
	db, err := accountdb.Open(conn, accountdb.DefaultConfig(), nil)
	if err != nil {
		return UsageKeys{}, err
	}
	clock := accountdb.NewClock(nil)
	key := func(account string) (string, string, error) {
		k, err := auth.GenerateKey()
		if err != nil {
			return "", "", err
		}
		return k.Key, k.ID, db.PutKey(ctx, accountdb.Key{Hash: k.Hash, ID: k.ID, Prefix: k.Prefix, AccountID: account,
			CreatedAt: uint64(time.Now().UnixMilli()), Version: clock.Next(0)})
	}
	name := func(i uint64) string { return fmt.Sprintf("bench-acc-%04d", i) }
	var keys UsageKeys
	for _, k := range []struct {
		dst *string
		acc string
	}{{&keys.Heavy, name(0)}, {&keys.Median, name(c.Accounts / 10)}, {&keys.Light, name(c.Accounts * 9 / 10)}} {
		if *k.dst, _, err = key(k.acc); err != nil {
			return UsageKeys{}, err
		}
	}
	if err := db.PutAccount(ctx, accountdb.Account{ID: "bench-operators", Name: "operators", Plan: "enterprise", CreatedAt: 1,
		Version: clock.Next(0)}); err != nil {
		return UsageKeys{}, err
	}
	var opID string
	if keys.Operator, opID, err = key("bench-operators"); err != nil {
		return UsageKeys{}, err
	}
	return keys, db.SetOperator(ctx, opID, true, clock.Next(0))
}
