package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/balances"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// BalanceConfig describes the balance state SeedBalances writes for the
// synthetic history of HistoryConfig (the same transactions): what the
// processor's sink and roller would have written for them, plus holders
// whose shape the balance benchmark needs.
//
//   - Every ERC-20 transfer of the history (a fifth of the transactions)
//     moves 1e18 of its token between two pool accounts: most holders have
//     a handful of changes.
//   - The routers swap: every other transaction they receive moves 1e18 of
//     token 0 from the router to the sender, or back: about 4, 2 and 0.8
//     million changes of one token for routers 0, 1 and 2 (50 million
//     transactions), the "router with millions of transfers".
//   - BalanceHolderID("tokens1000") holds 1,000 tokens (BalanceTokenID(k)),
//     five changes each at random blocks.
//   - BalanceHolderID("nfts10000") was minted 12,000 ERC-721 tokens of
//     BalanceNFTID() at random blocks and sent 2,000 of them on: it holds
//     10,000.
//   - BalanceHolderID("curve:N") for N of 1,000 to 1,000,000: N changes of
//     BalanceTokenID(0) spread evenly over the chain, for the curve of a read
//     at an old block against a holder's number of transfers.
//
// Then the roller sums every settled bucket, as the processor does.
type BalanceConfig struct {
	History HistoryConfig
	// Blocks is the number of blocks of the chain (from History.First).
	Blocks uint64
	// Settle is the roller's settle depth (--processor.balances-settle-blocks).
	Settle uint64
}

// BalanceHolderID is a seeded holder: the first 20 bytes of
// SHA-256("bench:"+name).
func BalanceHolderID(name string) string {
	h := sha256.Sum256([]byte("bench:" + name))
	return "0x" + hex.EncodeToString(h[:20])
}

// BalanceTokenID is the seeded ERC-20 token k of the balance holders:
// SHA-256("btoken:k").
func BalanceTokenID(k uint64) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("btoken:%d", k)))
	return "0x" + hex.EncodeToString(h[:20])
}

// BalanceNFTID is the seeded ERC-721 collection: SHA-256("bench:nft").
func BalanceNFTID() string { return BalanceHolderID("nft") }

// CurveHolders are the transfer counts of the curve holders.
var CurveHolders = []uint64{1_000, 10_000, 100_000, 1_000_000}

// sqlAddr is the SQL FixedString(20) of the first 20 bytes of SHA-256(s).
func sqlAddr(s string) string { return "toFixedString(substring(SHA256(" + s + "), 1, 20), 20)" }

var (
	zeroID = "unhex('" + strings.Repeat("00", 32) + "')"
	// balanceKeyOf is a level-0 key of chain, holder, block, kind, token,
	// token id and block hash expressions.
	balanceKeyOf = func(holder, block, kind, token, id, hash string) string {
		return schema.SQLBalanceKey("chain", "0", "intDiv("+block+", 1024)", holder, block, kind, token, id, hash)
	}
	// amountOf is the decimal amount of n (an Int64 expression) times 1e18.
	amountOf = func(n string) string {
		return "concat(if(" + n + " < 0, '-', ''), toString(abs(" + n + ")), '000000000000000000')"
	}
	blockHash = "SHA256(concat(toString(chain), ':', toString(blk)))"
)

// seedHistoryDeltas is the level-0 rows of the history's ERC-20 transfers
// and the routers' swaps of one chunk of transactions, netted per holder,
// token and block. Its parameters are historyRows' twice.
var seedHistoryDeltas = `INSERT INTO balances (bal_key, amount, version)
SELECT ` + balanceKeyOf("holder", "blk", "1", "tok", zeroID, blockHash) + `, ` + amountOf("n") + `, toUInt64(1)
FROM (
	SELECT chain, blk, holder, tok, sum(d) AS n
	FROM (
		SELECT chain, blk, if(k = 1, fromA, xferTo) AS holder, token AS tok, if(k = 1, -1, 1) AS d
		FROM (SELECT *, arrayJoin([1, 2]) AS k FROM (` + historyRows + `) WHERE erc AND status = 1)
		UNION ALL
		SELECT chain, blk, if(k = 1, fromA, toA) AS holder, ` + sqlAddr("'token:0'") + ` AS tok,
			if(k = 1, if(i % 2 = 0, 1, -1), if(i % 2 = 0, -1, 1)) AS d
		FROM (SELECT *, arrayJoin([1, 2]) AS k FROM (` + historyRows + `) WHERE NOT erc AND hot < 170 AND status = 1)
	)
	GROUP BY chain, blk, holder, tok
	HAVING n != 0
)`

// The special holders' rows (parameters: chain, first, blocks, pool, then
// each statement's own).
var (
	// seedRouterFloats gives each router 1e30 of token 0 at the first
	// block, so its balance stays positive through its swaps.
	seedRouterFloats = `INSERT INTO balances (bal_key, amount, version)
SELECT ` + balanceKeyOf(sqlAddr("concat('addr:', toString(number))"), "blk", "1", sqlAddr("'token:0'"), zeroID, blockHash) + `,
	'1000000000000000000000000000000', toUInt64(1)
FROM (SELECT toUInt64(?) AS chain, toUInt64(?) AS blk, toUInt64(?) AS blocks, toUInt64(?) AS pool, number FROM numbers(3))`

	// seedTokenHolder: five changes of each of 1,000 tokens (the fifth
	// one out), against pool accounts.
	seedTokenHolder = `INSERT INTO balances (bal_key, amount, version)
SELECT ` + balanceKeyOf("if(side = 1, holder, other)", "blk", "1", "tok", zeroID, blockHash) + `,
	` + amountOf("if(side = 1, d, -d)") + `, toUInt64(1)
FROM (
	SELECT chain, first + cityHash64(k, j, 11) % blocks AS blk, ` + sqlAddr("'bench:tokens1000'") + ` AS holder,
		` + sqlAddr("concat('addr:', toString(3 + cityHash64(k, j, 12) % pool))") + ` AS other,
		` + sqlAddr("concat('btoken:', toString(k))") + ` AS tok, if(j = 4, -1, 1) AS d, arrayJoin([1, 2]) AS side
	FROM (SELECT toUInt64(?) AS chain, toUInt64(?) AS first, toUInt64(?) AS blocks, toUInt64(?) AS pool,
		number % 1000 AS k, intDiv(number, 1000) AS j FROM numbers(5000))
)`

	// nftRows are the 14,000 transfers of the NFT holder: 12,000 mints,
	// then 2,000 of them sent on to pool accounts.
	nftRows = `
SELECT chain, n, if(t = 0, mb, mb + 1 + cityHash64(n, 14) % (blocks - 1 - (mb - first))) AS blk,
	if(t = 0, toFixedString(unhex('` + strings.Repeat("00", 20) + `'), 20), holder) AS fromA,
	if(t = 0, holder, ` + sqlAddr("concat('addr:', toString(3 + cityHash64(n, 15) % pool))") + `) AS toA,
	` + sqlAddr("'bench:nft'") + ` AS tok
FROM (
	SELECT chain, first, blocks, pool, n, first + cityHash64(n, 13) % (blocks - 1) AS mb,
		` + sqlAddr("'bench:nfts10000'") + ` AS holder, arrayJoin(if(n < 2000, [0, 1], [0])) AS t
	FROM (SELECT toUInt64(?) AS chain, toUInt64(?) AS first, toUInt64(?) AS blocks, toUInt64(?) AS pool, number AS n FROM numbers(12000))
)`

	seedNFTHolder = `INSERT INTO balances (bal_key, amount, version)
SELECT ` + balanceKeyOf("if(side = 1, fromA, toA)", "blk", "2", "tok", schema.SQLTokenID("n"), blockHash) + `,
	if(side = 1, '-1', '1'), toUInt64(1)
FROM (SELECT *, arrayJoin([1, 2]) AS side FROM (` + nftRows + `))
WHERE (side = 1 AND fromA != toFixedString(unhex('` + strings.Repeat("00", 20) + `'), 20)) OR side = 2`

	seedNFTTransfers = `INSERT INTO nft_transfers (nft_key, entry, version)
SELECT ` + schema.SQLNFTKey("chain", "tok", schema.SQLTokenID("n"), "2", "blk", "0", "0", blockHash) + `,
	concat(fromA, toA, '1'), toUInt64(1)
FROM (` + nftRows + `)`

	// seedCurveHolder: N changes of token 0 of the balance holders,
	// evenly over the chain, +2e18 and -1e18 in turn. Parameters: chain,
	// first, blocks, pool, the holder's name, N.
	seedCurveHolder = `INSERT INTO balances (bal_key, amount, version)
SELECT ` + balanceKeyOf(sqlAddr("name"), "blk", "1", sqlAddr("'btoken:0'"), zeroID, blockHash) + `,
	if(j % 2 = 0, '2000000000000000000', '-1000000000000000000'), toUInt64(1)
FROM (SELECT toUInt64(?) AS chain, toUInt64(?) AS first, toUInt64(?) AS blocks, toUInt64(?) AS pool, ? AS name, toUInt64(?) AS cnt,
	number AS j, first + intDiv(number * blocks, cnt) AS blk FROM numbers(?))`
)

// SeedBalances writes cfg's balance state (see BalanceConfig) by
// INSERT ... SELECT, then sums it with the roller.
func SeedBalances(ctx context.Context, conn driver.Conn, cfg BalanceConfig, logger *slog.Logger) error {
	h := cfg.History
	switch {
	case h.Txs == 0 || h.TxPerBlock == 0 || h.Addresses == 0 || h.Tokens == 0:
		return errors.New("bench: the balances need a history (Txs, TxPerBlock, Addresses, Tokens)")
	case cfg.Blocks < 2 || cfg.Blocks*h.TxPerBlock < h.Txs:
		return errors.New("bench: the balances need the history's blocks")
	}
	if h.Chunk == 0 {
		h.Chunk = 1_000_000
	}
	start := time.Now()
	exec := func(what, q string, args ...any) error {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
		defer cancel()
		if err := conn.Exec(cctx, q, args...); err != nil {
			return fmt.Errorf("bench: seed %s: %w", what, err)
		}
		return nil
	}
	for off := uint64(0); off < h.Txs; off += h.Chunk {
		n := min(h.Chunk, h.Txs-off)
		rows := []any{h.ChainID, h.TxPerBlock, h.First, h.Addresses, h.Tokens, off, n}
		if err := exec("history deltas", seedHistoryDeltas, append(rows, rows...)...); err != nil {
			return err
		}
		logger.Info("seeded balance deltas", "chain_id", h.ChainID, "transactions", off+n, "of", h.Txs,
			"elapsed", time.Since(start).Round(time.Millisecond))
	}
	common := []any{h.ChainID, h.First, cfg.Blocks, h.Addresses}
	if err := exec("router floats", seedRouterFloats, common...); err != nil {
		return err
	}
	if err := exec("a holder of 1,000 tokens", seedTokenHolder, common...); err != nil {
		return err
	}
	if err := exec("a holder of 10,000 NFTs", seedNFTHolder, common...); err != nil {
		return err
	}
	if err := exec("its NFT transfers", seedNFTTransfers, common...); err != nil {
		return err
	}
	for _, c := range CurveHolders {
		if err := exec("a curve holder", seedCurveHolder, append(common, fmt.Sprintf("bench:curve:%d", c), c, c)...); err != nil {
			return err
		}
	}
	// The pair directory of every holder, from the deltas, as the sink
	// writes it with them.
	lo, _ := schema.BalancePrefixRange(schema.BalanceParentPrefix(h.ChainID, schema.BalanceLevelDelta, 0))
	hi, _ := schema.BalancePrefixRange(schema.BalanceParentPrefix(h.ChainID, schema.BalanceLevelBucket, 0))
	if err := exec("the pair directory", `INSERT INTO balance_pairs (pair_key, version)
SELECT `+schema.SQLPairKeyOf("bal_key")+`, toUInt64(1)
FROM balances
WHERE bal_key >= unhex(?) AND bal_key < unhex(?)`, hex.EncodeToString(lo[:]), hex.EncodeToString(hi[:])); err != nil {
		return err
	}
	// The chain's first block, as the sink records it (a prepared batch:
	// an INSERT ... VALUES through Exec hangs on 18.16).
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	batch, err := conn.PrepareBatch(pctx, "INSERT INTO balance_progress ("+balances.ProgressColumns+")")
	if err == nil {
		if err = batch.Append(h.ChainID, schema.ProgressFirstBlock, h.First, balances.ProgressVersion(schema.ProgressFirstBlock, h.First)); err == nil {
			err = batch.Send()
		}
	}
	if err != nil {
		return fmt.Errorf("bench: seed progress: %w", err)
	}
	logger.Info("seeded balance deltas; summing the settled buckets", "elapsed", time.Since(start).Round(time.Millisecond))
	rcfg := balances.DefaultRollerConfig()
	if cfg.Settle > 0 {
		rcfg.Settle = cfg.Settle
	}
	roller := balances.NewRoller(balances.Conn{Conn: conn, Timeout: 10 * time.Minute}, rcfg, logger, prometheus.NewRegistry(), "querybench")
	head := h.First + cfg.Blocks - 1
	if err := roller.Roll(ctx, h.ChainID, head); err != nil {
		return fmt.Errorf("bench: sum the balance buckets: %w", err)
	}
	logger.Info("seeded balances", "chain_id", h.ChainID, "elapsed", time.Since(start).Round(time.Millisecond))
	return nil
}
