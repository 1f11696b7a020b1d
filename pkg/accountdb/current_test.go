package accountdb

import (
	"testing"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/testenv"
)

// TestStatementsRunOnCurrentClickHouse runs every statement of this package
// on current ClickHouse (chDB); the 18.16 runs are the other tests here.
func TestStatementsRunOnCurrentClickHouse(t *testing.T) {
	bind := testenv.Bind
	s, n := "'x'", "1"
	testenv.OnMigratedCurrentClickHouse(t,
		iAccount+" VALUES ('a', 'n', 'free', 1, 1)",
		iKey+" VALUES ('h', 'k', 'mk_1', 'a', 1, 0, 1)",
		iWebhook+" VALUES ('a', 'w', 'https://x', '43112', 'address_activity', '', '', ['0x01'], 0, 1, 'active', 1, 'r', 12, 1)",
		iAddress+" VALUES ('w', '0x01', '0x01', 0, 1)",
		iSecret+" VALUES ('a', 's', 1)",
		bind(qAccount, s), qAccounts,
		bind(qKeyByHash, s), bind(qKeyByID, s), bind(qKeysByAccount, s),
		bind(qWebhook, s, s), bind(qWebhookPage, s, "''", "''", "18446744073709551615", "18446744073709551615", "''", n),
		bind(qActiveWebhookCount, s, "'active'"), bind(qWebhookByRequestHash, s, s, n), qAllWebhooks,
		bind(qAddressStates, s, "('0x01', '0x02')"), bind(qAddressRange, s, "'0x'", "'0xg'", n),
		bind(qAddressCount, s), bind(qAddressesOf, "('w', 'v')", n), bind(qAddressChanges, n), qAllAddresses,
		bind(qSecret, s), qAllSecrets,
		iDelivery+" VALUES ('w', 1700000000000, 'm', 1, 'a', 43112, '0x01', 200, 'success', 5, '', 0, 'r')",
		bind(qDeliveryPage, s, n, "18446744073709551615", "18446744073709551615", "''", "''", "0", n),
		iStrike+" VALUES ('w', 'double_failure', 'm', 1, '', 1)",
		bind(qStrikeCount, s, s, s),
		iReplayJob+" VALUES ('w', 'r', 'a', 43112, 1, 10, 0, 0, 20, 1700000000000, 0, 1, 1)",
		iReplayProgress+" VALUES ('w', 'r', 'running', 12, 5, 3, 2, '', 1700000000000, 1700000000001, 11)",
		bind(qReplayJob, s, s), bind(qReplayJobs, s, n), qUnfinishedReplays, bind(qReplayProgress, s, "('r', 'q')"),
		bind(qReplayDeliveries, s, n, s),
		bind(chclient.PartitionsStatement, "'deliveries'"),
		iOperatorKey+" VALUES ('k', 1, 1)", bind(qOperatorKey, s),
		"ALTER TABLE deliveries DROP PARTITION 202311", // the month of the row above
		"ALTER TABLE deliveries DROP PARTITION 202001", // a month that holds nothing
	)
}
