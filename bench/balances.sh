#!/usr/bin/env bash
# The balance routes under load (make bench calls it; alone: make bench-balances).
#   Data: the balance state of BALANCES_TXS synthetic transactions (querybench seed --balances: the ERC-20
#   transfers of the history's distribution, three routers swapping one token about 4, 2 and 0.8 million times,
#   a holder of 1,000 tokens, a holder of 10,000 NFTs, curve holders of 1,000 to 1,000,000 transfers of one
#   token), summed by the roller as the processor does, in database moraine_bench_balances, chain 99997, 5
#   transactions a block. Seeded once and reused.
#   Load: each route on its own at BALANCES_RATE req/s, open loop, after a warm-up of their mix:
#   listErc20Balances of the holder of 1,000 tokens at the head and at a random past block, listErc721Balances
#   of the holder of 10,000 NFTs. Then the curve: listErc20Balances of one token at random past blocks for
#   holders of 10 to 4,000,000 transfers, at a low rate, with the rows ClickHouse read per request.
#   Native balances and token names come from a stand-in node (querybench node), which answers in microseconds.
# Writes its markdown section to the file named by $1 (make bench puts it in bench/results.md).
# Needs the local stack and ./bin.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/dev/stdout}
TMP=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT

TXS=${MORAINE_BENCH_BALANCES_TXS:-50000000}
ADDRESSES=${MORAINE_BENCH_BALANCES_ADDRESSES:-10000000}
RATE=${MORAINE_BENCH_BALANCES_RATE:-200}
DURATION=${MORAINE_BENCH_BALANCES_DURATION:-60s}
WARMUP=${MORAINE_BENCH_BALANCES_WARMUP:-60s}
CURVE_RATE=${MORAINE_BENCH_BALANCES_CURVE_RATE:-10}
CURVE_DURATION=${MORAINE_BENCH_BALANCES_CURVE_DURATION:-20s}
DB=moraine_bench_balances
CHAIN=99997
PER_BLOCK=5
BLOCKS=$(((TXS + PER_BLOCK - 1) / PER_BLOCK))
HEAD=$((BLOCKS - 1))
CH="http://127.0.0.1:${MORAINE_CLICKHOUSE_HTTP_PORT:-8123}/"
chq() { curl -fsS "$CH" --data-binary "$1"; }
commas() { echo "$1" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta'; }
# The seeded names (query/internal/ops/bench: BalanceHolderID, AddressID).
sha20() { printf '%s' "$1" | sha256sum | cut -c1-40; }
holder() { echo "0x$(sha20 "bench:$1")"; }

# The last table the seed writes: the roller's progress.
have=$(chq "SELECT argMax(value, version) FROM $DB.balance_progress WHERE chain_id = $CHAIN AND kind = 1" 2>/dev/null || echo 0)
if [ "${have:-0}" -lt $(((HEAD + 1 - 1024) / 1024)) ]; then
    echo "balances: seeding the balances of $TXS transactions over $BLOCKS blocks (database $DB, chain $CHAIN)..."
    chq "DROP DATABASE IF EXISTS $DB" >/dev/null
    t0=$(date +%s)
    bin/querybench seed --clickhouse.database "$DB" --chain "$CHAIN" --blocks "$BLOCKS" --txs "$TXS" \
        --tx-per-block "$PER_BLOCK" --addresses "$ADDRESSES" --history-tables none --balances | tee "$TMP/seed.txt"
    echo "balances: seeded in $(($(date +%s) - t0)) s"
else
    echo "balances: reusing the balances already seeded ($have level-1 buckets summed)"
fi
# What the tables hold, per transaction of the history.
sizes=$(chq "SELECT table, sum(rows), sum(bytes_on_disk) FROM system.parts WHERE active AND database = '$DB'
    AND table IN ('balances', 'nft_transfers', 'balance_progress') GROUP BY table ORDER BY table FORMAT TSV")
levels=$(chq "SELECT reinterpretAsUInt8(substring(bal_key, 9, 1)) AS level, count() FROM $DB.balances GROUP BY level ORDER BY level FORMAT TSV")

bin/querybench node --listen-address 127.0.0.1:18546 --chain "$CHAIN" --head "$HEAD" >"$TMP/node.log" 2>&1 &
cat >"$TMP/chains.json" <<JSON
{"chains":[{"evmChainId":"$CHAIN","name":"Synthetic balance chain","network":"mainnet","rpcUrls":["http://127.0.0.1:18546"],
 "networkToken":{"name":"Bench","symbol":"BNC","decimals":18},"traces":false,"webhooks":false}]}
JSON
# Rate limits are off (the keyless budget would refuse this load by design); the verifier is off (the
# stand-in node has no balances); the topic prefix keeps this instance's webhook reconciler away from the
# development deployment's topics.
bin/query --chains.file "$TMP/chains.json" --clickhouse.database "$DB" --http.listen-address 127.0.0.1:18082 \
    --ops.listen-address 127.0.0.1:18105 --api.page-token-secret "bench-secret-bench-secret-bench-secret" \
    --kafka.topic-prefix bench. --ratelimit.enabled=false --balances.verify-interval 0 --log.level warn >"$TMP/query.log" 2>&1 &
for _ in $(seq 1 120); do curl -fsS -m 1 127.0.0.1:18105/readyz >/dev/null 2>&1 && break; sleep 0.5; done

tokens=$(holder tokens1000)
nfts=$(holder nfts10000)
base="/v1/chains/$CHAIN/addresses"
# Half-way down the chain and older: blocks long summed into level-2 and level-1 rows.
past="{rand:0:$((HEAD - 2048))}"
routes=("$base/$tokens/balances:listErc20?pageSize=100"
        "$base/$tokens/balances:listErc20?pageSize=100&blockNumber=$past"
        "$base/$nfts/balances:listErc721?pageSize=100")
names=("listErc20Balances, a holder of 1,000 tokens, at the head"
       "listErc20Balances, a holder of 1,000 tokens, at a random past block"
       "listErc721Balances, a holder of 10,000 NFTs, at the head")
for r in "${routes[@]}"; do
    code=$(curl -s -o "$TMP/probe.json" -w '%{http_code}' "127.0.0.1:18082${r//\{rand:0:*\}/$((HEAD / 2))}")
    [ "$code" = 200 ] || { echo "balances: $r answered $code: $(head -c 300 "$TMP/probe.json")"; cat "$TMP/query.log"; exit 1; }
done
echo "balances: warm-up, $RATE req/s over the three routes for $WARMUP"
args=()
for r in "${routes[@]}"; do args+=(--path "$r"); done
bin/querybench load --url http://127.0.0.1:18082 --rate "$RATE" --duration "$WARMUP" --head-chain "$CHAIN" "${args[@]}" >/dev/null
: >"$TMP/load.txt"
for i in "${!routes[@]}"; do
    echo "balances: $RATE req/s for $DURATION: ${names[$i]}"
    echo "# ${names[$i]}" >>"$TMP/load.txt"
    bin/querybench load --url http://127.0.0.1:18082 --rate "$RATE" --duration "$DURATION" --head-chain "$CHAIN" \
        --path "${routes[$i]}" | tee -a "$TMP/load.txt"
done

# The curve: one token's balance at random past blocks, for holders of more and more transfers. Granules read
# per request: ClickHouse's SelectedMarks over the run (every query of the request: the balance rows, the
# canonical blocks of unsummed deltas, the progress) divided by the requests; SelectedRows, which ClickHouse
# 18.16 does not count, would be at most 256 times that (index_granularity of balances).
selected() { chq "SELECT sum(value) FROM system.events WHERE event = 'SelectedMarks'"; }
curve=()
curve_names=("pool account: $(chq "SELECT count() FROM $DB.balances WHERE substring(bal_key, 9, 1) = unhex('00') AND substring(bal_key, 18, 20) = unhex('$(sha20 addr:3)')") transfers"
    "curve:1000" "curve:10000" "curve:100000" "curve:1000000" "router 2 (about 0.8M)" "router 1 (about 2M)" "router 0 (about 4M)")
curve_addrs=("0x$(sha20 addr:3)" "$(holder curve:1000)" "$(holder curve:10000)" "$(holder curve:100000)" "$(holder curve:1000000)"
    "0x$(sha20 addr:2)" "0x$(sha20 addr:1)" "0x$(sha20 addr:0)")
curve_tokens=("" "0x$(sha20 btoken:0)" "0x$(sha20 btoken:0)" "0x$(sha20 btoken:0)" "0x$(sha20 btoken:0)"
    "0x$(sha20 token:0)" "0x$(sha20 token:0)" "0x$(sha20 token:0)")
for i in "${!curve_addrs[@]}"; do
    a=${curve_addrs[$i]}
    filter=""
    [ -n "${curve_tokens[$i]}" ] && filter="&contractAddresses=${curve_tokens[$i]}"
    n=$(chq "SELECT count() FROM $DB.balances WHERE substring(bal_key, 9, 1) = unhex('00') AND substring(bal_key, 18, 20) = unhex('${a#0x}')")
    before=$(selected)
    line=$(bin/querybench load --url http://127.0.0.1:18082 --rate "$CURVE_RATE" --duration "$CURVE_DURATION" --head-chain "$CHAIN" \
        --path "$base/$a/balances:listErc20?blockNumber=$past$filter" | grep '^all' | tr -s ' ')
    after=$(selected)
    reqs=$(echo "$line" | awk '{ for (i = 1; i < NF; i++) if ($i ~ /^n=/) { sub("n=", "", $i); print $i } }')
    curve+=("$(printf '%-26s %10s delta rows  %s  granules read/request %s' "${curve_names[$i]%%:*}" "$(commas "$n")" "$line" \
        "$(( (after - before) / (${reqs:-1} > 0 ? ${reqs:-1} : 1) ))")")
    echo "${curve[-1]}"
done

{
    echo "## Balances"
    echo
    echo "Data: the balance state of $(commas "$TXS") synthetic transactions of chain $CHAIN (\`querybench seed --balances\`, the"
    echo "history's distribution: $PER_BLOCK a block over $(commas "$BLOCKS") blocks, a fifth of them ERC-20 transfers between"
    echo "$(commas "$ADDRESSES") pool accounts, three routers swapping one token about 4, 2 and 0.8 million times; a holder of 1,000"
    echo "tokens with five changes each; a holder of 10,000 NFTs, minted 12,000 and sent 2,000 on; holders of 1,000 to 1,000,000"
    echo "transfers of one token), summed by the processor's roller into level-1 and level-2 rows (docs/balances.md). The"
    echo "native balance every list carries comes from a stand-in node (\`querybench node\`) that answers in microseconds."
    echo "Each route alone, open loop at $RATE req/s for $DURATION on loopback, after $WARMUP of their mix; pageSize 100."
    echo
    echo '```'
    cat "$TMP/load.txt"
    echo '```'
    echo
    echo "A balance at a random past block against the holder's number of transfers ($CURVE_RATE req/s for $CURVE_DURATION each,"
    echo "listErc20Balances with \`contractAddresses\` of the holder's busiest token; granules read: ClickHouse's SelectedMarks"
    echo "over the run divided by the requests, each granule at most 256 rows):"
    echo
    echo '```'
    printf '%s\n' "${curve[@]}"
    echo '```'
    echo
    echo "Tables (rows, bytes on disk): $(echo "$sizes" | awk '{ printf "%s%s %s rows %.1f MB", sep, $1, $2, $3/1e6; sep = "; " }');"
    echo "balances rows by level: $(echo "$levels" | awk '{ printf "%slevel %s %s", sep, $1, $2; sep = ", " }')."
    echo "Per transaction of the history: $(echo "$sizes" | awk -v txs="$TXS" '{ b += $3 } END { printf "%.1f", b / txs }') bytes."
} >"$OUT"
