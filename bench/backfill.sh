#!/usr/bin/env bash
# make bench-backfill: the sustained backfill of a large corpus (make corpus) end to end, with reads
# while it writes (BenchmarkBackfillCorpus in e2e/backfill_test.go says what is measured). Prints a
# line every 10 s, then the summary; the report goes to bench/backfill.md and into bench/results.md and
# README.md. Needs the local stack (make bench-backfill starts it) and, for the current-ClickHouse half
# of the column study, chDB (installed here).
#
# Settings (environment): MORAINE_BENCH_NOTE (a paragraph put at the head of the report), MORAINE_BENCH_CORPUS (the corpus directory; built with the CORPUS_* sizes
# when missing), MORAINE_BENCH_READ_RATE (200), MORAINE_BENCH_REPORT (10s), MORAINE_BENCH_AFTER_RATE
# (500), MORAINE_BENCH_AFTER_DURATION (30s), MORAINE_BENCH_AFTER_WARMUP (60s), MORAINE_BENCH_AFTER_TX_RATE (200: a block's
# transactions, read after the backfill), MORAINE_BENCH_CAPACITY_RATES (500,1000,1500,2000; empty for
# none: the serving phase's read mix after the idle backfill at each rate), MORAINE_BENCH_STUDY_ROWS
# (1000000), MORAINE_BENCH_COLUMN_STUDY=0 to skip the study, MORAINE_BENCH_INGEST_ARGS, MORAINE_BENCH_PHASES
# ("idle serving"), MORAINE_BENCH_READ_TARGET (50ms), MORAINE_BENCH_HEAD_TARGET (0: off; the processor's
# --processor.head-latency-target when serving), MORAINE_BENCH_MAX_LEAD (2000: ingest's --ingest.max-lead
# when serving), MORAINE_BENCH_INDEXING_NICE (0: none; when serving, ingest's, the processor's and the
# replay source's autogroup nice, their CPU weight below the serving processes'), MORAINE_BENCH_HEAD_INGEST=1
# (the development chain followed by an ingest instance of its own, not lowered), MORAINE_BENCH_DEVCHAIN=0 (no
# development chain),
# MORAINE_E2E_PROCESSOR_ARGS and MORAINE_E2E_QUERY_ARGS (more flags of the processor and the query service),
# MORAINE_TEST_KEEP_DB=1 to keep the database afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/longrun.sh
STATE_DIR=${MORAINE_STATE_DIR:-.moraine}
CORPUS=${MORAINE_BENCH_CORPUS:-$STATE_DIR/corpus}
if [ ! -f "$CORPUS/corpus.json" ]; then
    echo "bench-backfill: no corpus at $CORPUS; building it"
    (cd deploy && go build -o ../bin/corpus ./cmd/corpus)
    bin/corpus --out "$CORPUS" --blocks "${CORPUS_BLOCKS:-200000}" --transactions "${CORPUS_TRANSACTIONS:-5000000}"
fi
CORPUS=$(cd "$CORPUS" && pwd -P)
export MORAINE_BENCH_CORPUS=$CORPUS
export MORAINE_CHDB_PYTHON=${MORAINE_CHDB_PYTHON:-$(bash deploy/stack/chdb.sh install)}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
machine="$(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(. /etc/os-release && echo "$PRETTY_NAME")"
echo "bench-backfill: machine: $machine; corpus: $CORPUS"
# Two runs of the whole corpus, each on a fresh database and topics (MORAINE_BENCH_PHASES picks):
#   idle     nothing served: the backfill's own speed, CPU and bytes per transaction, then the
#            500 req/s reads on the finished database and the column study;
#   serving  serving first: reads at MORAINE_BENCH_READ_RATE and the development chain's webhooks
#            while the corpus backfills, with the processor's write budget on
#            (--processor.read-latency-target=$MORAINE_BENCH_READ_TARGET, 50ms; and
#            --processor.head-latency-target and the indexing processes' CPU weight when
#            MORAINE_BENCH_HEAD_TARGET and MORAINE_BENCH_INDEXING_NICE say so).
PHASES=${MORAINE_BENCH_PHASES:-idle serving}
: >"$TMP/out.txt"
for phase in $PHASES; do
    case $phase in
    idle)
        echo "backfill phase idle: nothing served, the write budget off" | tee -a "$TMP/out.txt"
        (cd e2e && MORAINE_BENCH_READ_RATE=0 MORAINE_BENCH_DEVCHAIN=0 MORAINE_BENCH_INDEXING_NICE=0 \
            MORAINE_BENCH_CAPACITY_RATES=${MORAINE_BENCH_CAPACITY_RATES-500,1000,1500,2000} \
            go test -run '^$' -bench 'BenchmarkBackfillCorpus' -benchtime 1x -count 1 -timeout 6h . 2>&1) | tee -a "$TMP/out.txt"
        ;;
    serving)
        target=${MORAINE_BENCH_READ_TARGET:-50ms} head=${MORAINE_BENCH_HEAD_TARGET:-0} nice=${MORAINE_BENCH_INDEXING_NICE:-0}
        echo "backfill phase serving: reads at ${MORAINE_BENCH_READ_RATE:-200} req/s and the development chain's webhooks while the corpus backfills; processor --processor.read-latency-target=$target --processor.head-latency-target=$head, ingest --ingest.max-lead=${MORAINE_BENCH_MAX_LEAD:-2000}; ingest, processor and replay source at autogroup nice $nice" | tee -a "$TMP/out.txt"
        (cd e2e && MORAINE_BENCH_AFTER_DURATION=0 MORAINE_BENCH_COLUMN_STUDY=0 MORAINE_BENCH_INDEXING_NICE=$nice \
            MORAINE_E2E_PROCESSOR_ARGS="${MORAINE_E2E_PROCESSOR_ARGS:-} --processor.read-latency-target=$target --processor.head-latency-target=$head" \
            MORAINE_BENCH_INGEST_ARGS="${MORAINE_BENCH_INGEST_ARGS:-} --ingest.max-lead=${MORAINE_BENCH_MAX_LEAD:-2000}" \
            go test -run '^$' -bench 'BenchmarkBackfillCorpus' -benchtime 1x -count 1 -timeout 6h . 2>&1) | tee -a "$TMP/out.txt"
        ;;
    *) echo "bench-backfill: unknown phase $phase (idle, serving)"; exit 2 ;;
    esac
done
[ "$(grep -c '^backfill summary: [0-9]* blocks' "$TMP/out.txt")" -eq "$(wc -w <<<"$PHASES")" ] || { echo "bench-backfill: a run did not finish; nothing written"; exit 1; }
{
    echo "## Sustained backfill (make bench-backfill)"
    echo
    if [ -n "${MORAINE_BENCH_NOTE:-}" ]; then
        echo "$MORAINE_BENCH_NOTE"
        echo
    fi
    echo "Measured $(date -u +%Y-%m-%d) on: $machine; ClickHouse 18.16 and Apache Kafka from the local stack on the same machine."
    echo "Corpus: $(python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print(f\"{m['blocks']:,} blocks ({m['first']:,}..{m['last']:,}), {m['transactions']:,} transactions, {m['logs']:,} logs, {m['callFrames']:,} call frames, built by make corpus from {', '.join(s['file'] for s in m.get('sources', []))}\")" "$CORPUS/corpus.json"),"
    echo "served from disk by the replay source; ingest -> Kafka -> processor (sink and matcher) -> ClickHouse. Run twice: with nothing"
    echo "served (idle), then serving first (serving): \`querybench load\` reading the newest blocks, random blocks and random blocks'"
    echo "transactions of what is indexed so far at ${MORAINE_BENCH_READ_RATE:-200} req/s, and the development chain (a block every 500 ms,"
    echo "12 transactions) indexed beside it with a webhook on five of its busy accounts, the processor's write budget on."
    echo "CPU µs/tx: from each process's CPU counters (/proc); \"all\" is ingest, processor, delivery, ClickHouse and Kafka (the local"
    echo "stack's, shared with whatever else runs on the machine), the replay source (the node's stand-in) and query apart."
    echo
    echo '```'
    grep -E '^(backfill|column|codecs)' "$TMP/out.txt"
    echo '```'
} >bench/backfill.md
splice_report backfill bench/backfill.md
echo "bench-backfill: wrote bench/backfill.md, bench/results.md and README.md"
