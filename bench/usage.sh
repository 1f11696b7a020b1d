#!/usr/bin/env bash
# The API as a product, measured (make bench calls it; alone: make bench-usage). Three parts:
#   1. Request logging's cost: GET /v1/chains/{id}/blocks and /blocks/{n} at USAGE_RATE req/s on the 10M-block
#      chain of make bench (database moraine_bench, seeded here when missing), with request logging on (query
#      --usage.enabled, the processor's usage sink writing the log) and off, alternating in one run (on first in
#      odd rounds, off first in even ones); p50/p99 per route and variant (the median of the rounds, and their
#      range), and query's CPU time per 1,000 requests (from /proc, less sensitive to the shared machine than
#      latency). The sink writes every 30 s (--usage.flush-interval): a variant runs 60 s per route, so an "on"
#      one holds three or four of its writes, and the next variant starts once the sink has written the last
#      one's records (else an "off" one would carry writes of the "on" one before it).
#   2. A 60-second outage of ClickHouse under load: e2e BenchmarkUsageOutage (records lost, duplicated, catch-up).
#   3. Usage reads over USAGE_REQUESTS (10,000,000) logged requests (database moraine_bench_usage, seeded once with
#      querybench seed-usage, reseeded when it is more than a day old): getApiUsageMetrics at each interval and
#      getApiLogs, for the heaviest account, a median one and an operator key (every account), at USAGE_READ_RATE.
# Writes its markdown section to the file named by $1 (make bench puts it in bench/results.md).
# Needs the local stack and ./bin.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/dev/stdout}
TMP=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT

RATE=${MORAINE_BENCH_USAGE_RATE:-500}
DURATION=${MORAINE_BENCH_USAGE_DURATION:-60s}
ROUNDS=${MORAINE_BENCH_USAGE_ROUNDS:-4}
BLOCKS=${MORAINE_BENCH_BLOCKS:-10000000}
REQUESTS=${MORAINE_BENCH_USAGE_REQUESTS:-10000000}
READ_RATE=${MORAINE_BENCH_USAGE_READ_RATE:-20}
# An operator's reads (every account's usage: a dashboard, a support tool) are fewer and heavier.
OPERATOR_RATE=${MORAINE_BENCH_USAGE_OPERATOR_RATE:-5}
READ_DURATION=${MORAINE_BENCH_USAGE_READ_DURATION:-60s}
# Which parts to run (1 2 3); the others' sections say "not run".
PARTS=${MORAINE_BENCH_USAGE_PARTS:-1 2 3}
part() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
onoff="not run"
outage="not run"
reads="not run"
size=""
written=0
CH="http://127.0.0.1:${MORAINE_CLICKHOUSE_HTTP_PORT:-8123}/"
chq() { curl -fsS "$CH" --data-binary "$1"; }
commas() { echo "$1" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta'; }
wait_ready() { for _ in $(seq 1 240); do curl -fsS -m 1 "$1" >/dev/null 2>&1 && return 0; sleep 0.5; done; echo "usage: $1 never ready" >&2; return 1; }
# cpu_ms PID: the process's user+system CPU time so far, in ms.
cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{ print int(($14 + $15) * 1000 / hz) }' "/proc/$1/stat"; }

cat >"$TMP/chains.json" <<JSON
{"chains":[{"evmChainId":"99999","name":"Synthetic benchmark chain","network":"mainnet","rpcUrls":["http://127.0.0.1:1"],
 "networkToken":{"name":"Bench","symbol":"BNC","decimals":18},"traces":false,"webhooks":false}]}
JSON

# 1. Logging on against off.
if part 1; then
have=$(chq "SELECT count() FROM moraine_bench.blocks WHERE chain_id = 99999" 2>/dev/null || echo 0)
if [ "${have:-0}" -lt "$BLOCKS" ]; then
    echo "usage: seeding $BLOCKS synthetic blocks (database moraine_bench, chain 99999)..."
    chq "DROP DATABASE IF EXISTS moraine_bench" >/dev/null
    bin/querybench seed --clickhouse.database moraine_bench --chain 99999 --blocks "$BLOCKS"
fi
# The processor runs only its usage sink here: the request log is what is measured.
bin/processor --chains.file "$TMP/chains.json" --clickhouse.database moraine_bench --kafka.topic-prefix bench-usage. \
    --processor.sink-enabled=false --matcher.enabled=false --nft.enabled=false --ops.listen-address 127.0.0.1:18105 --log.level warn \
    >"$TMP/processor.log" 2>&1 &
PROC_PID=$!
wait_ready http://127.0.0.1:18105/readyz
last=$((BLOCKS - 1))
paths=("/v1/chains/99999/blocks" "/v1/chains/99999/blocks/{rand:0:$last}")
# query_up LOGGING: query with request logging on or off. Rate limits off: the keyless budget would refuse
# this load by design.
query_up() {
    bin/query --chains.file "$TMP/chains.json" --clickhouse.database moraine_bench --http.listen-address 127.0.0.1:18080 \
        --ops.listen-address 127.0.0.1:18103 --api.page-token-secret "bench-secret-bench-secret-bench-secret" \
        --kafka.topic-prefix bench-usage. --ratelimit.enabled=false --usage.enabled="$1" --export.workers 0 --log.level warn \
        >>"$TMP/query.log" 2>&1 &
    QUERY_PID=$!
    wait_ready http://127.0.0.1:18103/readyz
}
query_down() { kill "$QUERY_PID" 2>/dev/null || true; wait "$QUERY_PID" 2>/dev/null || true; }
# logged: the requests in the log so far; drain N: wait (at most 2 min) until the log holds N, what query
# produced before it stopped.
logged() { chq "SELECT count() FROM moraine_bench.api_requests"; }
produced() { awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^n=/) { sub("n=", "", $i); n += $i } } END { print n + 0 }'; }
drain() {
    for _ in $(seq 1 120); do [ "$(logged)" -ge "$1" ] && return 0; sleep 1; done
    echo "usage: the log holds $(logged) of $1 requests after 2 min" >&2
}
# Warm ClickHouse's caches with the random lookups first (bench/run.sh says why).
chq "SELECT count(), sum(length(header)) FROM moraine_bench.block_lookup FORMAT Null" >/dev/null
query_up true
echo "usage: warm-up, $RATE req/s for 60s"
before=$(logged)
n=$(bin/querybench load --url http://127.0.0.1:18080 --rate "$RATE" --duration 60s --path "${paths[1]}" | grep '^all' | produced || true)
query_down
drain $((before + n))
: >"$TMP/onoff.txt"
for round in $(seq 1 "$ROUNDS"); do
    # On first in odd rounds, off first in even ones: a drift of the machine over the run weighs on both alike.
    order="true false"
    [ $((round % 2)) -eq 0 ] && order="false true"
    for logging in $order; do
        before=$(logged)
        query_up "$logging"
        for p in "${paths[@]}"; do
            q0=$(cpu_ms "$QUERY_PID"); p0=$(cpu_ms "$PROC_PID")
            echo "usage: round $round, logging $logging, $RATE req/s for $DURATION on $p"
            res=$(bin/querybench load --url http://127.0.0.1:18080 --rate "$RATE" --duration "$DURATION" --path "$p" | grep '^all')
            q1=$(cpu_ms "$QUERY_PID"); p1=$(cpu_ms "$PROC_PID")
            echo "$logging $p $res cpu_query_ms=$((q1 - q0)) cpu_processor_ms=$((p1 - p0))" | tee -a "$TMP/onoff.txt"
        done
        query_down
        [ "$logging" = true ] && drain $((before + $(grep "^true " "$TMP/onoff.txt" | tail -n ${#paths[@]} | produced)))
    done
done
kill "$PROC_PID" 2>/dev/null || true
wait "$PROC_PID" 2>/dev/null || true
written=$(chq "SELECT count() FROM moraine_bench.api_requests")
# Per route and variant: the median of the rounds' p50 and p99, and query's CPU per 1,000 requests.
onoff=$(python3 - "$TMP/onoff.txt" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    logging, path = line.split()[:2]
    m = dict(re.findall(r"(\w+)=(\S+)", line))
    rows.setdefault((path, logging), []).append(m)
def ms(s):
    v, unit = re.match(r"([0-9.]+)([a-zµ]+)", s).groups()
    return float(v) * {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1, "s": 1000}[unit]
for path in sorted({p for p, _ in rows}):
    out = {}
    for logging in ("true", "false"):
        r = rows[(path, logging)]
        n = sum(int(x["n"]) for x in r) or 1
        p99s = [ms(x["p99"]) for x in r]
        out[logging] = (statistics.median(ms(x["p50"]) for x in r), statistics.median(p99s),
                        1000 * sum(int(x["cpu_query_ms"]) for x in r) / n, 1000 * sum(int(x["cpu_processor_ms"]) for x in r) / n,
                        min(p99s), max(p99s))
    on, off = out["true"], out["false"]
    print(f"{path}: logging on p50 {on[0]:.2f}ms p99 {on[1]:.2f}ms (rounds {on[4]:.2f}-{on[5]:.2f}); off p50 {off[0]:.2f}ms p99 {off[1]:.2f}ms (rounds {off[4]:.2f}-{off[5]:.2f}); "
          f"p99 {100*(on[1]/off[1]-1):+.1f}% with logging; "
          f"query CPU per 1,000 requests {on[2]:.0f} ms on, {off[2]:.0f} ms off ({100*(on[2]/off[2]-1):+.1f}%), the usage sink {on[3]:.0f} ms")
PY
)
echo "$onoff"
fi

# 2. ClickHouse outage under load.
if part 2; then
echo "usage: a ${MORAINE_BENCH_OUTAGE:-60s} outage of ClickHouse under load (e2e BenchmarkUsageOutage)..."
outage=$( (cd e2e && go test -run '^$' -bench 'BenchmarkUsageOutage' -benchtime 1x -timeout 20m . 2>&1) | tee "$TMP/outage.txt" | grep -E '^usage-outage' || true)
echo "$outage"
fi

# 3. Usage reads over REQUESTS logged requests.
if part 3; then
DB=moraine_bench_usage
have=$(chq "SELECT count() FROM $DB.api_requests" 2>/dev/null || echo 0)
age=$(chq "SELECT toUInt64(now()) - intDiv(max(at), 1000) FROM $DB.api_requests" 2>/dev/null || echo 999999)
KEYS=${MORAINE_BENCH_USAGE_KEYS:-${MORAINE_STATE_DIR:-.moraine}/bench-usage-keys}
if [ "${have:-0}" -lt "$REQUESTS" ] || [ "${age:-999999}" -gt 86400 ] || [ ! -s "$KEYS" ]; then
    echo "usage: seeding $REQUESTS logged requests (database $DB)..."
    chq "DROP DATABASE IF EXISTS $DB" >/dev/null
    mkdir -p "$(dirname "$KEYS")"
    bin/querybench seed-usage --clickhouse.database "$DB" --requests "$REQUESTS" --accounts 1000 --days 30 \
        --keys-out "$KEYS" | tee "$TMP/seed.txt"
    # Merged, as a steady stream of small inserts leaves them once ClickHouse's background merges catch up
    # (the seed's ten large inserts would otherwise be merging during the reads).
    for t in $(chq "SELECT name FROM system.tables WHERE database = '$DB' AND name LIKE 'api_%' AND engine NOT LIKE '%View' FORMAT TSV"); do
        chq "OPTIMIZE TABLE $DB.$t FINAL"
    done
else
    echo "usage: reusing the $have logged requests already seeded"
fi
key() { awk -v k="$1" '$1 == k { print $2 }' "$KEYS"; }
size=$(chq "SELECT table, sum(rows), formatReadableSize(sum(bytes_on_disk)) FROM system.parts
    WHERE database = '$DB' AND active GROUP BY table ORDER BY table FORMAT TSV" | awk -F'\t' '{ printf "%-18s %12s rows %10s\n", $1, $2, $3 }')
bin/query --chains.file "$TMP/chains.json" --clickhouse.database "$DB" --http.listen-address 127.0.0.1:18082 \
    --ops.listen-address 127.0.0.1:18106 --api.page-token-secret "bench-secret-bench-secret-bench-secret" \
    --kafka.topic-prefix bench-usage. --ratelimit.enabled=false --usage.enabled=false --export.workers 0 --log.level warn \
    >"$TMP/query-usage.log" 2>&1 &
USAGE_PID=$!
wait_ready http://127.0.0.1:18106/readyz
today=$(date -u +%s)
d7=$((today - 6 * 86400))
d30=$((today - 29 * 86400))
account_paths=(
    "/v1/apiUsageMetrics?startTimestamp=$d30&endTimestamp=$today&groupBy=requestPath"
    "/v1/apiUsageMetrics?timeInterval=hourly&startTimestamp=$d7&endTimestamp=$today&groupBy=responseCode"
    "/v1/apiUsageMetrics?timeInterval=minute&startTimestamp=$today&endTimestamp=$today"
    "/v1/apiLogs?pageSize=100"
    "/v1/apiLogs?pageSize=100&responseCode=404&startTimestamp=$d30&endTimestamp=$today"
)
operator_paths=(
    "/v1/apiUsageMetrics?timeInterval=monthly&startTimestamp=$d30&endTimestamp=$today&groupBy=apiKeyId"
    "/v1/apiUsageMetrics?startTimestamp=$d30&endTimestamp=$today&groupBy=responseCode"
    "/v1/apiUsageMetrics?timeInterval=hourly&startTimestamp=$d7&endTimestamp=$today&groupBy=requestPath"
    "/v1/apiUsageMetrics?timeInterval=weekly&startTimestamp=$d30&endTimestamp=$today&chainId=43114"
    "/v1/apiLogs?pageSize=100"
)
: >"$TMP/reads.txt"
for who in heavy median operator; do
    args=()
    rate=$READ_RATE
    if [ "$who" = operator ]; then ps=("${operator_paths[@]}"); rate=$OPERATOR_RATE; else ps=("${account_paths[@]}"); fi
    for p in "${ps[@]}"; do args+=(--path "$p"); done
    echo "usage: reads as the $who key, $rate req/s for $READ_DURATION"
    bin/querybench load --url http://127.0.0.1:18082 --rate "$rate" --duration "$READ_DURATION" \
        --header "x-glacier-api-key: $(key "$who")" "${args[@]}" | sed "s|^|$who |" | tee -a "$TMP/reads.txt"
done
kill "$USAGE_PID" 2>/dev/null || true
reads=$(cat "$TMP/reads.txt")
fi


{
    echo "## The API as a product: request logging, a ClickHouse outage, usage reads"
    echo
    echo "Request logging's cost: the 10M-block chain of the query-latency runs, open-loop $RATE req/s for $DURATION per"
    echo "route, query with request logging on (records to Kafka; the processor's usage sink writing them to ClickHouse on"
    echo "the same machine every 30 s) and off, $ROUNDS rounds of each alternating (on first in odd rounds; the next variant"
    echo "starts once the log holds the last one's requests); the medians of the rounds and their range, and CPU time from /proc"
    echo "($(commas "$written") requests logged by the runs):"
    echo
    echo '```'
    echo "$onoff"
    echo '```'
    echo
    echo "A ClickHouse outage under load: e2e BenchmarkUsageOutage (C-Chain blocks 1..100 through the real pipeline; a proxy"
    echo "in front of ClickHouse cuts query's and the processor's connections and refuses new ones for the outage):"
    echo
    echo '```'
    echo "$outage"
    echo '```'
    echo
    echo "Usage reads over $(commas "$REQUESTS") logged requests (\`querybench seed-usage\`: 1,000 accounts, 30 days, the heaviest"
    echo "account a fifth of them; merged), open-loop $READ_RATE req/s for $READ_DURATION per account key ($OPERATOR_RATE req/s for the"
    echo "operator key), round-robin over the paths:"
    echo
    echo '```'
    echo "$size"
    echo
    echo "$reads"
    echo '```'
} >"$OUT"
echo "usage: done"
