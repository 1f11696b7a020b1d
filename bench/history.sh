#!/usr/bin/env bash
# The transaction-history routes under load (make bench calls it; alone: make bench-history).
#   Data: HISTORY_TXS synthetic transactions (querybench seed --txs: three routers with 10%, 5% and 2% of
#   them, a pool of HISTORY_ADDRESSES accounts with a handful each, a fifth ERC-20 transfers), 5 a block,
#   in database moraine_bench_history, chain 99998. Seeded once and reused (about 18 s per million; for 50M the
#   seed peaks at about 70 GB on disk, replaced parts lingering for ClickHouse's 8 minutes, and settles at 31 GB).
#   Load: four routes, each on its own at HISTORY_RATE req/s, open loop, after a warm-up of their mix:
#   an address's transactions (first page, random account), page 1,000 of the busiest router's
#   transactions, a transaction by hash (random), an account's ERC-20 transfers (random).
# Writes its markdown section to the file named by $1 (make bench puts it in bench/results.md).
# Needs the local stack and ./bin.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/dev/stdout}
TMP=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT

TXS=${MORAINE_BENCH_HISTORY_TXS:-50000000}
ADDRESSES=${MORAINE_BENCH_HISTORY_ADDRESSES:-10000000}
RATE=${MORAINE_BENCH_HISTORY_RATE:-200}
DURATION=${MORAINE_BENCH_HISTORY_DURATION:-60s}
WARMUP=${MORAINE_BENCH_HISTORY_WARMUP:-60s}
DB=moraine_bench_history
CHAIN=99998
PER_BLOCK=5
BLOCKS=$(((TXS + PER_BLOCK - 1) / PER_BLOCK))
CH="http://127.0.0.1:${MORAINE_CLICKHOUSE_HTTP_PORT:-8123}/"
chq() { curl -fsS "$CH" --data-binary "$1"; }
commas() { echo "$1" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta'; }

# A database seeded before migration 16 has its transactions in transactions (copied below).
have=$(chq "SELECT count() FROM $DB.transactions_by_block WHERE chain_id = $CHAIN" 2>/dev/null || echo 0)
[ "${have:-0}" != 0 ] || have=$(chq "SELECT count() FROM $DB.transactions WHERE chain_id = $CHAIN" 2>/dev/null || echo 0)
if [ "${have:-0}" -lt "$TXS" ]; then
    echo "history: seeding $TXS transactions over $BLOCKS blocks (database $DB, chain $CHAIN)..."
    chq "DROP DATABASE IF EXISTS $DB" >/dev/null
    bin/querybench seed --clickhouse.database "$DB" --chain "$CHAIN" --blocks "$BLOCKS" --txs "$TXS" \
        --tx-per-block "$PER_BLOCK" --addresses "$ADDRESSES" | tee "$TMP/seed.txt"
else
    echo "history: reusing the $have transactions already seeded"
fi
cat >"$TMP/chains.json" <<JSON
{"chains":[{"evmChainId":"$CHAIN","name":"Synthetic history chain","network":"mainnet","rpcUrls":["http://127.0.0.1:1"],
 "networkToken":{"name":"Bench","symbol":"BNC","decimals":18},"traces":true,"webhooks":false}]}
JSON
# Rate limits are off (the keyless budget would refuse this load by design); the topic prefix keeps this
# instance's webhook reconciler away from the development deployment's topics.
bin/query --chains.file "$TMP/chains.json" --clickhouse.database "$DB" --http.listen-address 127.0.0.1:18081 \
    --ops.listen-address 127.0.0.1:18104 --api.page-token-secret "bench-secret-bench-secret-bench-secret" \
    --kafka.topic-prefix bench. --ratelimit.enabled=false --log.level warn >"$TMP/query.log" 2>&1 &
QUERY_PID=$!
for _ in $(seq 1 120); do curl -fsS -m 1 127.0.0.1:18104/readyz >/dev/null 2>&1 && break; sleep 0.5; done
# A database seeded before migration 8 has its lists in address_index: copy them as an operator upgrading
# would (docs/transactions.md, "Upgrading"), by the first hex digit of the address, each range one part.
if [ "$(chq "SELECT count() FROM $DB.address_lists")" = 0 ] && [ "$(chq "SELECT count() FROM $DB.address_index" 2>/dev/null || echo 0)" != 0 ]; then
    echo "history: copying address_index into address_lists (the migration-8 upgrade), in 16 address ranges..."
    t0=$(date +%s)
    copy=$(grep -v '^--' schemas/clickhouse/upgrades/000008_copy_address_index.sql)
    for d in 0 1 2 3 4 5 6 7 8 9 a b c d e f; do
        range="address >= unhex('$d$(printf '0%.0s' $(seq 39))')"
        [ "$d" = f ] || range="$range AND address < unhex('$(printf '%x' $((16#$d + 1)))$(printf '0%.0s' $(seq 39))')"
        curl -fsS "$CH?database=$DB&min_insert_block_size_rows=100000000&min_insert_block_size_bytes=8589934592" \
            --data-binary "$copy WHERE $range"
    done
    echo "history: copied in $(($(date +%s) - t0)) s; dropping address_index"
    chq "DROP TABLE $DB.address_index"
    chq "OPTIMIZE TABLE $DB.address_lists FINAL"
fi
# Likewise transaction_lookup (migration 9). Its upgrade copy keeps details without the block's fields, which
# the processor now writes (history.proto), so the benchmark seeds the table as the processor would fill it.
if [ "$(chq "SELECT count() FROM $DB.transactions_by_hash")" = 0 ]; then
    echo "history: seeding transactions_by_hash (migration 9) for the $have transactions..."
    bin/querybench seed --clickhouse.database "$DB" --chain "$CHAIN" --blocks 0 --txs "$TXS" --tx-per-block "$PER_BLOCK" \
        --addresses "$ADDRESSES" --history-tables transactions_by_hash | tee -a "$TMP/seed.txt"
    chq "OPTIMIZE TABLE $DB.transactions_by_hash FINAL"
    chq "DROP TABLE IF EXISTS $DB.transaction_lookup"
fi
# Likewise transactions (migration 16), by block range, each range one part.
if [ "$(chq "SELECT count() FROM $DB.transactions_by_block")" = 0 ] && [ "$(chq "SELECT count() FROM $DB.transactions" 2>/dev/null || echo 0)" != 0 ]; then
    echo "history: copying transactions into transactions_by_block (the migration-16 upgrade), in 10 block ranges..."
    t0=$(date +%s)
    copy=$(grep -v '^--' schemas/clickhouse/upgrades/000016_copy_transactions.sql)
    step=$(((BLOCKS + 9) / 10))
    for lo in $(seq 0 "$step" $((BLOCKS - 1))); do
        curl -fsS "$CH?database=$DB&min_insert_block_size_rows=100000000&min_insert_block_size_bytes=8589934592" \
            --data-binary "$copy WHERE block_number >= $lo AND block_number < $((lo + step))"
    done
    echo "history: copied in $(($(date +%s) - t0)) s; emptying transactions"
    chq "TRUNCATE TABLE $DB.transactions"
    chq "OPTIMIZE TABLE $DB.transactions_by_block FINAL"
fi
size=$(chq "SELECT table, sum(rows), formatReadableSize(sum(bytes_on_disk)) FROM system.parts
    WHERE database = '$DB' AND active GROUP BY table ORDER BY sum(bytes_on_disk) DESC FORMAT TSV" |
    awk -F'\t' '{ printf "%-22s %14s rows %12s\n", $1, $2, $3 }')
total=$(chq "SELECT formatReadableSize(sum(bytes_on_disk)) FROM system.parts WHERE database = '$DB' AND active")

URL=http://127.0.0.1:18081
router_key=$(printf '%016x' "$CHAIN")$(printf 'addr:0' | sha256sum | cut -c1-40)01
router=$(chq "SELECT count() FROM $DB.address_lists WHERE list_key >= unhex('$router_key$(printf '0%.0s' $(seq 104))')
    AND list_key <= unhex('$router_key$(printf 'f%.0s' $(seq 104))')")
busiest=0x$(printf 'addr:0' | sha256sum | cut -c1-40)
echo "history: following the busiest router's transactions to page 1,000 (pageSize 10)..."
start=$(date +%s)
token=$(bin/querybench page-token --url "$URL" --path "/v1/chains/$CHAIN/addresses/$busiest/transactions" --pages 999)
walk=$(($(date +%s) - start))
last=$((TXS - 1))
pool=$((ADDRESSES + 2))
paths=(
    "/v1/chains/$CHAIN/addresses/{addr:3:$pool}/transactions"
    "/v1/chains/$CHAIN/addresses/$busiest/transactions?pageToken=$token"
    "/v1/chains/$CHAIN/transactions/{txhash:0:$last}"
    "/v1/chains/$CHAIN/addresses/{addr:3:$pool}/transactions:listErc20"
)
# Each route on its own at RATE, as the blocks routes are measured; first the four together at RATE in all, to
# warm ClickHouse's caches as steady traffic keeps them.
args=()
for p in "${paths[@]}"; do args+=(--path "$p"); done
echo "history: warm-up, $RATE req/s over the four routes for $WARMUP"
warm=$(bin/querybench load --url "$URL" --rate "$RATE" --duration "$WARMUP" "${args[@]}" | grep '^all' | tr -s ' ' || true)
echo "$warm"
: >"$TMP/load.txt"
# What the disk holding ClickHouse's data did during each route (from /proc/diskstats): a page that misses the
# page cache costs a read per column, so these figures say whether a route waited on the disk.
disk_dev=$(basename "$(df --output=source "${MORAINE_STATE_DIR:-.moraine}" | tail -1)")
diskstat() { awk -v d="$disk_dev" '$3 == d { print $4, $6, $7 }' /proc/diskstats; }
[ -n "$(diskstat)" ] || disk_dev="" # not a device /proc/diskstats names (device-mapper): no disk figures
for p in "${paths[@]}"; do
    echo "history: $RATE req/s for $DURATION on ${p//$token/TOKEN}"
    before="$(diskstat) $(date +%s%N)"
    bin/querybench load --url "$URL" --rate "$RATE" --duration "$DURATION" --path "$p" >"$TMP/load.raw" || true
    load=$(grep -v '^all' "$TMP/load.raw")
    echo "${load//$token/TOKEN}" | tee -a "$TMP/load.txt"
    [ -z "$disk_dev" ] || echo "$before $(diskstat) $(date +%s%N)" | awk -v d="$disk_dev" '{ n = $5 - $1; if (n < 1) n = 1
        printf "  disk %s: %.0f reads/s, %.1f KB a read, %.2f ms a read\n", d, n / (($8 - $4) / 1e9), ($6 - $2) * 512 / 1024 / n, ($7 - $3) / n }' |
        tee -a "$TMP/load.txt"
done
block_size=$(chq "SELECT value FROM system.settings WHERE name = 'min_compress_block_size'")
kill "$QUERY_PID" 2>/dev/null || true
wait "$QUERY_PID" 2>/dev/null || true

{
    echo "## Transaction history"
    echo
    echo "Data: $(commas "$TXS") synthetic transactions of chain $CHAIN (\`querybench seed --txs\`), $PER_BLOCK a block, in the"
    echo "processor's table layout: three routers receive 10%, 5% and 2% of the transactions (the busiest has"
    echo "$(commas "$router") rows in its list), every other party is one of $(commas "$ADDRESSES") accounts (a handful of"
    echo "transactions each); a fifth of the transactions are ERC-20 transfers. On disk: $total. The server's"
    echo "\`min_compress_block_size\` is $block_size (docs/transactions.md, \"Disk reads\")."
    echo
    echo '```'
    echo "$size"
    echo '```'
    echo
    echo "Load: open loop, $RATE req/s on each route in turn for $DURATION (\`querybench load\`, loopback), after $WARMUP of"
    echo "the four mixed at $RATE req/s (warm-up: \`${warm:-none}\`): an account's transactions (first page; {addr} a random account), page"
    echo "1,000 of the busiest router's transactions (pageSize 10: 9,990 rows deep; following the 999 pages to its"
    echo "token took $walk s), a random transaction by hash, an account's ERC-20 transfers."
    echo
    echo '```'
    cat "$TMP/load.txt"
    echo '```'
} >>"$OUT"
