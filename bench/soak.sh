#!/usr/bin/env bash
# make soak: a long run at the head of the development chain (BenchmarkSoak in e2e/soak_test.go says
# what is measured): a block a second with 200 transactions, 1,000 webhooks watching 100,000 addresses
# between them, deliveries to a local receiver. Prints a window every 5 minutes, then the summary; the
# report goes to bench/soak.md and into bench/results.md and README.md. Needs the local stack (make soak
# starts it). Not part of CI.
#
# Settings (environment): MORAINE_BENCH_NOTE (a paragraph put at the head of the report), MORAINE_SOAK_DURATION (30m), MORAINE_SOAK_REPORT (5m),
# MORAINE_SOAK_TX_PER_BLOCK (200), MORAINE_SOAK_WEBHOOKS (1000), MORAINE_SOAK_ADDRESSES_PER_WEBHOOK (100),
# MORAINE_SOAK_HOT_WEBHOOKS (20).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/longrun.sh
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
machine="$(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(. /etc/os-release && echo "$PRETTY_NAME")"
duration=${MORAINE_SOAK_DURATION:-30m}
echo "soak: machine: $machine; $duration"
(cd e2e && go test -run '^$' -bench 'BenchmarkSoak' -benchtime 1x -count 1 -timeout 12h . 2>&1) | tee "$TMP/out.txt"
grep -q '^soak summary' "$TMP/out.txt" || { echo "soak: the run did not finish; nothing written"; exit 1; }
{
    echo "## Long run at the head (make soak)"
    echo
    if [ -n "${MORAINE_BENCH_NOTE:-}" ]; then
        echo "$MORAINE_BENCH_NOTE"
        echo
    fi
    echo "Measured $(date -u +%Y-%m-%d) on: $machine; ClickHouse 18.16 and Apache Kafka from the local stack on the same machine."
    echo "The development chain (go-ethereum, archive mode) at one block a second with ${MORAINE_SOAK_TX_PER_BLOCK:-200} transactions each;"
    echo "${MORAINE_SOAK_WEBHOOKS:-1000} webhooks watching ${MORAINE_SOAK_ADDRESSES_PER_WEBHOOK:-100} addresses each, ${MORAINE_SOAK_HOT_WEBHOOKS:-20} of them one of the chain's busy accounts too;"
    echo "signed deliveries to a local receiver. Latency: from the node's announcement of the block (newHeads) to the"
    echo "message's arrival. $duration, a window every ${MORAINE_SOAK_REPORT:-5m}."
    echo
    echo '```'
    grep -E '^soak' "$TMP/out.txt"
    echo '```'
} >bench/soak.md
splice_report soak bench/soak.md
echo "soak: wrote bench/soak.md, bench/results.md and README.md"
