#!/usr/bin/env bash
# Starts and stops moraine's own processes for `make run` / `make down`: the development chain and the
# four services, built into ./bin, in the background with pid and log files under the state dir. The
# stack (ClickHouse, Kafka) is deploy/stack/stack.sh's job.
#
# Usage: run.sh up|down|status
# Environment: MORAINE_STATE_DIR (default <repo>/.moraine), MORAINE_CHAINS_FILE (default
#              deploy/chains/dev.json), MORAINE_CHAIN_SOURCE=devchain|replay, with replay MORAINE_REPLAY_FILE
#              and MORAINE_REPLAY_MODE (live|backfill), and any MORAINE_* service flag. Example:
#   MORAINE_CHAIN_SOURCE=replay MORAINE_CHAINS_FILE=deploy/chains/replay-gunzilla.json \
#   MORAINE_REPLAY_FILE=../shared/data/avalanche/gunzilla_14M/GUNZILLA_BLOCKS.jsonl.zst make run
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
STATE_DIR=${MORAINE_STATE_DIR:-$REPO_ROOT/.moraine}
mkdir -p "$STATE_DIR/run" "$STATE_DIR/logs"
STATE_DIR=$(cd "$STATE_DIR" && pwd -P)
BIN=$REPO_ROOT/bin
CHAINS_FILE=${MORAINE_CHAINS_FILE:-$REPO_ROOT/deploy/chains/dev.json}
eval "$(bash "$REPO_ROOT/deploy/stack/stack.sh" env)"

# name -> readiness URL. Order matters: up starts them in this order, down stops them in reverse.
PROCS=(devchain ingest processor query delivery)
declare -A READY=(
    [devchain]=""
    [ingest]="http://127.0.0.1:9101/readyz"
    [processor]="http://127.0.0.1:9102/readyz"
    [query]="http://127.0.0.1:9103/readyz"
    [delivery]="http://127.0.0.1:9104/readyz"
)

pidfile() { echo "$STATE_DIR/run/$1.pid"; }
running() {
    local p
    p=$(cat "$(pidfile "$1")" 2>/dev/null) || return 1
    kill -0 "$p" 2>/dev/null
}

args_for() {
    case $1 in
    devchain)
        if [ "${MORAINE_CHAIN_SOURCE:-devchain}" = replay ]; then
            echo "$BIN/replay --replay.file ${MORAINE_REPLAY_FILE:?set MORAINE_REPLAY_FILE} --replay.mode ${MORAINE_REPLAY_MODE:-live}"
        else
            # The chain persists under the state dir, so `make down` + `make run` continue it.
            echo "$BIN/devchain --datadir $STATE_DIR/devchain"
        fi
        ;;
    ingest) echo "$BIN/ingest --chains.file $CHAINS_FILE" ;;
    processor) echo "$BIN/processor --chains.file $CHAINS_FILE" ;;
    # The development stack delivers to receivers on this machine (loopback), which production refuses:
    # query (when it accepts a webhook URL) and delivery (when it connects) apply the same policy, one flag.
    query) echo "$BIN/query --chains.file $CHAINS_FILE --delivery.allow-private-targets" ;;
    delivery) echo "$BIN/delivery --chains.file $CHAINS_FILE --delivery.allow-private-targets" ;;
    esac
}

wait_ready() {
    local name=$1 url=${READY[$1]} i
    for i in $(seq 1 120); do
        if ! running "$name"; then
            echo "run.sh: $name exited; last log lines:" >&2
            tail -n 30 "$STATE_DIR/logs/$name.log" >&2
            return 1
        fi
        if [ -z "$url" ]; then
            # The chain source has no /readyz: wait for JSON-RPC to answer.
            curl -fsS -m 2 -H 'content-type: application/json' \
                -d '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}' http://127.0.0.1:8545 >/dev/null 2>&1 && return 0
        elif curl -fsS -m 2 "$url" >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.5
    done
    echo "run.sh: $name not ready after 60 s ($url); last log lines:" >&2
    tail -n 30 "$STATE_DIR/logs/$name.log" >&2
    return 1
}

up() {
    for name in "${PROCS[@]}"; do
        if running "$name"; then
            echo "$name: already running (pid $(cat "$(pidfile "$name")"))"
            continue
        fi
        # shellcheck disable=SC2046
        nohup $(args_for "$name") >>"$STATE_DIR/logs/$name.log" 2>&1 &
        echo $! >"$(pidfile "$name")"
        wait_ready "$name"
        echo "$name: ready (pid $(cat "$(pidfile "$name")"), log $STATE_DIR/logs/$name.log)"
    done
    local key
    key=$("$BIN/moraine-admin" dev-key --out "$STATE_DIR/dev-api-key") || { echo "run.sh: could not create the development API key" >&2; return 1; }
    echo
    echo "development API key (saved in $STATE_DIR/dev-api-key): $key"
    local chain
    chain=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["chains"][0]["evmChainId"])' "$CHAINS_FILE" 2>/dev/null || echo 43112)
    echo "moraine is up. Try: curl -s '127.0.0.1:8080/v1/chains/$chain/blocks?pageSize=3'"
}

down() {
    local i name p
    for ((i = ${#PROCS[@]} - 1; i >= 0; i--)); do
        name=${PROCS[$i]}
        if ! running "$name"; then
            rm -f "$(pidfile "$name")"
            continue
        fi
        p=$(cat "$(pidfile "$name")")
        kill -TERM "$p" 2>/dev/null || true
        for _ in $(seq 1 60); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
        kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null || true
        rm -f "$(pidfile "$name")"
        echo "$name: stopped"
    done
}

status() {
    local rc=0
    for name in "${PROCS[@]}"; do
        if running "$name"; then echo "$name: running (pid $(cat "$(pidfile "$name")"))"; else echo "$name: stopped"; rc=3; fi
    done
    return $rc
}

case ${1:-} in
up) up ;;
down) down ;;
status) status ;;
*) echo "usage: run.sh up|down|status" >&2; exit 2 ;;
esac
