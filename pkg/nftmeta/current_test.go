package nftmeta

import (
	"testing"

	"github.com/moraine-data/moraine/pkg/testenv"
)

// TestStatementsRunOnCurrentClickHouse runs every statement of this package
// on current ClickHouse (chDB); TestStoreIntegration runs them on 18.16.
func TestStatementsRunOnCurrentClickHouse(t *testing.T) {
	testenv.OnMigratedCurrentClickHouse(t,
		iMetadata+" VALUES (43112, unhex('0102030405060708090a0b0c0d0e0f1011121314'), '1', 721, 'ipfs://x', 'INDEXED', 1, "+
			"'n', 's', 'd', 'i', 'a', 'e', 'b', '[]', '', -1, 1, 0, 0, '', 1)",
		testenv.Bind(qMetadata, "43112", "['0102030405060708090a0b0c0d0e0f1011121314']", "['1', '2']"),
		iReindex+" VALUES (43112, unhex('0102030405060708090a0b0c0d0e0f1011121314'), '1', 1)",
		testenv.Bind(qLastReindex, "43112", "'0102030405060708090a0b0c0d0e0f1011121314'", "'1'"),
	)
}
