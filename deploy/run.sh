#!/usr/bin/env bash
# Starts and stops moraine's own processes for `make run` / `make down`: the development chain and the
# four services, built into ./bin, in the background with pid and log files under the state dir. The
# stack (ClickHouse, Kafka) is deploy/stack/stack.sh's job.
#
# Usage: run.sh up|down|status
#        run.sh cluster up|down|status
#        run.sh cluster start|kill NAME...   (one instance, e.g. query-2 or ingest-1; kill is SIGKILL)
# The cluster profile (`make cluster`) runs the chain source and MORAINE_CLUSTER_INSTANCES (2) instances
# of every service on the engines of `stack.sh cluster`, every port from deploy/stack/cluster-layout.sh,
# pid and log files under <state>/cluster/{run,logs}. Chain files naming 127.0.0.1:8545 are rewritten to
# the cluster's chain source port (base+545) into <state>/cluster/chains.json.
# Environment: MORAINE_STATE_DIR (default <repo>/.moraine), MORAINE_CHAINS_FILE (default
#              deploy/chains/dev.json), MORAINE_CHAIN_SOURCE=devchain|replay, with replay MORAINE_REPLAY_FILE
#              and MORAINE_REPLAY_MODE (live|backfill), and any MORAINE_* service flag. Example:
#   MORAINE_CHAIN_SOURCE=replay MORAINE_CHAINS_FILE=deploy/chains/replay-gunzilla.json \
#   MORAINE_REPLAY_FILE=../shared/data/avalanche/gunzilla_14M/GUNZILLA_BLOCKS.jsonl.zst make run
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
STATE_DIR=${MORAINE_STATE_DIR:-$REPO_ROOT/.moraine}
mkdir -p "$STATE_DIR"
STATE_DIR=$(cd "$STATE_DIR" && pwd -P)
BIN=$REPO_ROOT/bin
CHAINS_FILE=${MORAINE_CHAINS_FILE:-$REPO_ROOT/deploy/chains/dev.json}

# The profile sets these: the process names in start order, where their pid and log files go, and for
# each process its command line (ARGS) and readiness URL (READY; empty for the chain source).
PROCS=()
RUN_DIR=
LOG_DIR=
CHAIN_RPC=
declare -A ARGS=() READY=()

# nft_args are the processor's NFT metadata flags for the local chain source: the development chain serves its
# collections' metadata documents and an IPFS gateway on its JSON-RPC address (package devchain), on
# loopback, which production refuses (--nft.allow-private-targets, like --delivery.allow-private-targets).
nft_args() {
    if [ "${MORAINE_CHAIN_SOURCE:-devchain}" = replay ]; then
        echo "--nft.allow-private-targets"
    else
        echo "--nft.allow-private-targets --nft.ipfs-gateway $1/ipfs/"
    fi
}

chain_source_args() {
    local listen=$1
    if [ "${MORAINE_CHAIN_SOURCE:-devchain}" = replay ]; then
        echo "$BIN/replay --replay.file ${MORAINE_REPLAY_FILE:?set MORAINE_REPLAY_FILE} --replay.mode ${MORAINE_REPLAY_MODE:-live}${listen:+ --rpc.listen-address $listen}"
    else
        # The chain persists under the state dir, so `make down` + `make run` continue it.
        echo "$BIN/devchain --datadir $2${listen:+ --rpc.listen-address $listen}"
    fi
}

single_profile() {
    eval "$(bash "$REPO_ROOT/deploy/stack/stack.sh" env)"
    RUN_DIR=$STATE_DIR/run
    LOG_DIR=$STATE_DIR/logs
    CHAIN_RPC=http://127.0.0.1:8545
    PROCS=(devchain ingest processor query delivery)
    ARGS=(
        [devchain]="$(chain_source_args "" "$STATE_DIR/devchain")"
        [ingest]="$BIN/ingest --chains.file $CHAINS_FILE"
        [processor]="$BIN/processor --chains.file $CHAINS_FILE $(nft_args "$CHAIN_RPC")"
        # The development stack delivers to receivers on this machine (loopback), which production refuses:
        # query (when it accepts a webhook URL) and delivery (when it connects) apply the same policy, one flag.
        [query]="$BIN/query --chains.file $CHAINS_FILE --delivery.allow-private-targets"
        [delivery]="$BIN/delivery --chains.file $CHAINS_FILE --delivery.allow-private-targets"
    )
    READY=(
        [devchain]=""
        [ingest]="http://127.0.0.1:9101/readyz"
        [processor]="http://127.0.0.1:9102/readyz"
        [query]="http://127.0.0.1:9103/readyz"
        [delivery]="http://127.0.0.1:9104/readyz"
    )
}

cluster_profile() {
    # shellcheck source=deploy/stack/cluster-layout.sh
    source "$REPO_ROOT/deploy/stack/cluster-layout.sh"
    local msg
    msg=$(cluster_layout_check) || { echo "run.sh: $msg" >&2; exit 2; }
    eval "$(bash "$REPO_ROOT/deploy/stack/stack.sh" cluster env)"
    # Topic settings for three brokers (the services' defaults derive them from the broker count; given
    # here as the cluster's intent). As environment, so a service without these flags is not refused.
    export MORAINE_KAFKA_REPLICATION_FACTOR=3 MORAINE_KAFKA_MIN_INSYNC_REPLICAS=2
    local dir=$STATE_DIR/cluster
    RUN_DIR=$dir/run
    LOG_DIR=$dir/logs
    CHAIN_RPC=http://127.0.0.1:$(port_devchain)
    mkdir -p "$RUN_DIR" "$LOG_DIR"
    # The chain files name the single node's chain source; the cluster's listens elsewhere.
    local chains=$dir/chains.json
    sed "s/127\.0\.0\.1:8545/127.0.0.1:$(port_devchain)/g" "$CHAINS_FILE" >"$chains.tmp" && mv -f "$chains.tmp" "$chains"

    PROCS=(devchain)
    ARGS=([devchain]="$(chain_source_args "127.0.0.1:$(port_devchain)" "$dir/devchain")")
    READY=([devchain]="")
    local s i name common
    for s in "${CLUSTER_SERVICES[@]}"; do
        for ((i = 1; i <= CLUSTER_INSTANCES; i++)); do
            name=$s-$i
            PROCS+=("$name")
            common="--chains.file $chains --ops.listen-address 127.0.0.1:$(port_ops "$s" "$i")"
            # --clickhouse.cluster on the command line, not only in the environment: a build without
            # cluster support must refuse to start rather than create unreplicated tables. (ingest
            # does not use ClickHouse.)
            [ "$s" = ingest ] || common+=" --clickhouse.cluster $CLUSTER_NAME"
            READY[$name]="http://127.0.0.1:$(port_ops "$s" "$i")/readyz"
            case $s in
            ingest) ARGS[$name]="$BIN/ingest $common" ;;
            # Each matcher needs its own transactional id, stable across its restarts; the default
            # (from the host name) would be the same for both, and each would fence the other.
            processor) ARGS[$name]="$BIN/processor $common --matcher.transactional-id moraine-matcher-$name $(nft_args "$CHAIN_RPC")" ;;
            # Behind nginx (127.0.0.1): client IPs come from X-Forwarded-For, and each instance enforces
            # 1/N of every plan's budget. The page-token key file is shared through the state dir.
            query) ARGS[$name]="$BIN/query $common --http.listen-address 127.0.0.1:$(port_query "$i") --http.trusted-proxies 127.0.0.1 --ratelimit.instances $CLUSTER_INSTANCES --delivery.allow-private-targets" ;;
            delivery) ARGS[$name]="$BIN/delivery $common --delivery.allow-private-targets" ;;
            esac
        done
    done
}

pidfile() { echo "$RUN_DIR/$1.pid"; }
running() {
    local p
    p=$(cat "$(pidfile "$1")" 2>/dev/null) || return 1
    kill -0 "$p" 2>/dev/null
}

# wait_ready NAME [healthz]: until the process answers (its /readyz, or /healthz with the second argument).
wait_ready() {
    local name=$1 url=${READY[$1]} i
    [ "${2:-}" = healthz ] && url=${url%/readyz}/healthz
    for i in $(seq 1 120); do
        if ! running "$name"; then
            echo "run.sh: $name exited; last log lines:" >&2
            tail -n 30 "$LOG_DIR/$name.log" >&2
            return 1
        fi
        if [ -z "$url" ]; then
            # The chain source has no /readyz: wait for JSON-RPC to answer.
            curl -fsS -m 2 -H 'content-type: application/json' \
                -d '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}' "$CHAIN_RPC" >/dev/null 2>&1 && return 0
        elif curl -fsS -m 2 "$url" >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.5
    done
    echo "run.sh: $name not ready after 60 s ($url); last log lines:" >&2
    tail -n 30 "$LOG_DIR/$name.log" >&2
    return 1
}

# start_proc NAME [healthz]
start_proc() {
    local name=$1
    if running "$name"; then
        echo "$name: already running (pid $(cat "$(pidfile "$name")"))"
        return 0
    fi
    mkdir -p "$RUN_DIR" "$LOG_DIR"
    # shellcheck disable=SC2086 # ARGS holds a command line split on spaces
    nohup ${ARGS[$name]} >>"$LOG_DIR/$name.log" 2>&1 &
    echo $! >"$(pidfile "$name")"
    wait_ready "$name" "${2:-}"
    echo "$name: ready (pid $(cat "$(pidfile "$name")"), log $LOG_DIR/$name.log)"
}

stop_proc() {
    local name=$1 p
    if ! running "$name"; then
        rm -f "$(pidfile "$name")"
        return 0
    fi
    p=$(cat "$(pidfile "$name")")
    kill -TERM "$p" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$p" 2>/dev/null; then kill -KILL "$p" 2>/dev/null || true; fi
    rm -f "$(pidfile "$name")"
    echo "$name: stopped"
}

# dev_key FILE: create (or find again) the development account's API key, saved in FILE.
dev_key() {
    local key
    key=$("$BIN/moraine-admin" dev-key --out "$1") || { echo "run.sh: could not create the development API key" >&2; return 1; }
    echo
    echo "development API key (saved in $1): $key"
}

first_chain_id() {
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["chains"][0]["evmChainId"])' "$CHAINS_FILE" 2>/dev/null || echo 43112
}

up() {
    for name in "${PROCS[@]}"; do start_proc "$name"; done
    dev_key "$STATE_DIR/dev-api-key"
    echo "moraine is up. Try: curl -s '127.0.0.1:8080/v1/chains/$(first_chain_id)/blocks?pageSize=3'"
}

# A build from before cluster mode has no --clickhouse.cluster: say so instead of a usage error per service.
# ingest has no ClickHouse flags; it is built with the others.
require_cluster_support() {
    local s help
    for s in "${CLUSTER_SERVICES[@]}"; do
        [ -x "$BIN/$s" ] || { echo "run.sh: $BIN/$s missing: run make build" >&2; return 1; }
        [ "$s" = ingest ] && continue
        # Read whole, not piped into grep -q: grep would quit at the match, the service die of SIGPIPE
        # writing the rest, and pipefail fail the test.
        help=$("$BIN/$s" -help 2>&1 || true)
        if [[ $help != *-clickhouse.cluster* ]]; then
            echo "run.sh: $BIN/$s has no --clickhouse.cluster flag: this build cannot run on the cluster (replicated tables, ON CLUSTER DDL)" >&2
            return 1
        fi
    done
}

cluster_up() {
    require_cluster_support
    local name
    for name in "${PROCS[@]}"; do
        case $name in
        # One ingest per chain writes, the others stand by: only the first must become ready; the rest
        # must be alive (a standby may report itself not ready).
        ingest-1) start_proc "$name" ;;
        ingest-*) start_proc "$name" healthz ;;
        *) start_proc "$name" ;;
        esac
    done
    # Its own file: the cluster's accounts are not the single-node stack's.
    dev_key "$STATE_DIR/cluster/dev-api-key"
    echo "moraine cluster is up. Try: curl -s '127.0.0.1:$(port_api)/v1/chains/$(first_chain_id)/blocks?pageSize=3'"
}

# down: stop in reverse start order; the instances of one service (name-N) stop together.
down() {
    local i name kind prev="" group=()
    for ((i = ${#PROCS[@]} - 1; i >= 0; i--)); do
        name=${PROCS[$i]}
        kind=${name%-[0-9]*}
        if [ ${#group[@]} -gt 0 ] && [ "$kind" != "$prev" ]; then
            stop_together "${group[@]}"
            group=()
        fi
        group+=("$name")
        prev=$kind
    done
    if [ ${#group[@]} -gt 0 ]; then stop_together "${group[@]}"; fi
}

stop_together() {
    local n
    for n in "$@"; do stop_proc "$n" & done
    wait
}

status() {
    local rc=0 name
    for name in "${PROCS[@]}"; do
        if running "$name"; then echo "$name: running (pid $(cat "$(pidfile "$name")"))"; else echo "$name: stopped"; rc=3; fi
    done
    return $rc
}

known_proc() {
    [[ -n ${ARGS[$1]+x} ]] || { echo "run.sh: unknown process '$1' (${PROCS[*]})" >&2; exit 2; }
}

# kill_proc NAME: SIGKILL, as a crash would, for the fault suite.
kill_proc() {
    local name=$1 p
    if ! running "$name"; then
        echo "$name: not running"
        return 0
    fi
    p=$(cat "$(pidfile "$name")")
    kill -KILL "$p" 2>/dev/null || true
    while kill -0 "$p" 2>/dev/null; do sleep 0.05; done
    rm -f "$(pidfile "$name")"
    echo "$name: killed (pid $p)"
}

usage() {
    echo "usage: run.sh up|down|status | run.sh cluster up|down|status | run.sh cluster start|kill NAME..." >&2
    exit 2
}

if [ "${1:-}" = cluster ]; then
    shift
    cluster_profile
    case ${1:-} in
    up) cluster_up ;;
    down) down ;;
    status) status ;;
    start | kill)
        cmd=$1
        shift
        [ $# -gt 0 ] || usage
        for name in "$@"; do known_proc "$name"; done
        for name in "$@"; do
            case $cmd:$name in
            kill:*) kill_proc "$name" ;;
            # A restarted ingest may well be the standby now: alive is enough.
            start:ingest-*) start_proc "$name" healthz ;;
            *) start_proc "$name" ;;
            esac
        done
        ;;
    *) usage ;;
    esac
    exit
fi

single_profile
case ${1:-} in
up) up ;;
down) down ;;
status) status ;;
*) usage ;;
esac
