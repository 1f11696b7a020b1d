package balances

import (
	"strings"
	"testing"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/testenv"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// TestStatementsRunOnCurrentClickHouse runs every statement of this package
// on current ClickHouse (chDB) over the migrated schema, with rows to read;
// the other integration tests run them on 18.16.
func TestStatementsRunOnCurrentClickHouse(t *testing.T) {
	bind := testenv.Bind
	k := func(c string) string { return "'" + strings.Repeat(c, schema.BalanceKeyLen) + "'" }
	n := func(c string) string { return "'" + strings.Repeat(c, schema.NFTKeyLen) + "'" }
	var ranges []string
	for range rangeSlots {
		ranges = append(ranges, k("00"), k("ff"))
	}
	filtered := Query{Kinds: []uint8{1, 3}, Tokens: make([]evm.Address, 1)}
	testenv.OnMigratedCurrentClickHouse(t,
		"INSERT INTO balances ("+BalanceColumns+") VALUES (unhex("+k("01")+"), '-5', 1)",
		"INSERT INTO nft_transfers (nft_key, entry, version) VALUES (unhex("+n("02")+"), repeat('a', 41), 1)",
		"INSERT INTO balance_progress ("+ProgressColumns+") VALUES (1, 0, 5, 18446744073709551610)",
		"INSERT INTO blocks (chain_id, number, hash, removed, version) VALUES (1, 5, repeat('h', 32), 0, 1)",
		bind(qProgress, "1"),
		bind(holderRowsQuery(1, Query{}), ranges[:2]...),
		bind(holderRowsQuery(rangeSlots, filtered), append(ranges, "(1, 3)", "('0101')")...),
		bind(qCanonicalIn, "1", "(5, 6)"), bind(qCanonicalRange, "1", "0", "1023"),
		bind(qRangeRows, k("00"), k("ff")),
		"INSERT INTO balance_pairs (pair_key, version) VALUES (unhex('"+strings.Repeat("01", schema.PairKeyLen)+"'), 1)",
		bind(pairsQuery(Query{}), "'"+strings.Repeat("00", schema.PairKeyLen)+"'", "'"+strings.Repeat("ff", schema.PairKeyLen)+"'", "10"),
		bind(pairsQuery(filtered), "'"+strings.Repeat("00", schema.PairKeyLen)+"'", "'"+strings.Repeat("ff", schema.PairKeyLen)+"'", "(1, 2)", "('AB')", "10"),
		bind(qNFTRows, n("00"), n("ff")),
		bind(qNFTRowsOf, n("00"), n("ff"), "('"+strings.Repeat("02", 32)+"')"),
		bind(qSample, k("00"), k("ff"), "77", "10"),
	)
}
