# shellcheck shell=bash disable=SC2034 # the variables are used by the scripts that source this file
# The local cluster's nodes and ports, in one place: sourced by deploy/stack/stack.sh (the engines and
# nginx) and deploy/run.sh (the services behind nginx), which must agree on them.
#
# Every port is MORAINE_CLUSTER_PORT_BASE (default 19000) plus a fixed offset, so a second cluster (another
# state dir) runs beside the first with another base, and none of them meets the single-node stack
# (ClickHouse 9000/8123, Kafka 9092/9093) or `make run` (8080, 8545, 9101-9104):
#
#   base+10N, +10N+1, +10N+2   clickhouse-N: native, http, interserver (N = 1..6)
#   base+80                    nginx: the cluster's Data API, in front of the query instances
#   base+80+N                  query-N: HTTP (N = 1..9)
#   base+100+10N, +100+10N+1   kafka-N: broker, KRaft controller (N = 1..3)
#   base+181                   ZooKeeper (clients)
#   base+200+10S+N             ops port of instance N of service S (ingest 1, processor 2, query 3, delivery 4)
#   base+545                   the development chain's JSON-RPC

CLUSTER_NAME=moraine
CLUSTER_PORT_BASE=${MORAINE_CLUSTER_PORT_BASE:-19000}
CLUSTER_CH_SHARDS=${MORAINE_CLUSTER_CLICKHOUSE_SHARDS:-1}
CLUSTER_CH_REPLICAS=${MORAINE_CLUSTER_CLICKHOUSE_REPLICAS:-2}
# Three combined broker+controller nodes: the smallest KRaft quorum that survives one loss, and the
# smallest cluster where replication factor 3 with min.insync.replicas 2 keeps accepting acks=all writes
# with one broker down.
CLUSTER_KAFKA_NODES=3
# Instances of each moraine service that run.sh starts on the cluster.
CLUSTER_INSTANCES=${MORAINE_CLUSTER_INSTANCES:-2}
CLUSTER_SERVICES=(ingest processor query delivery)

# cluster_layout_check: the settings leave every port in its block; prints what is wrong and fails.
cluster_layout_check() {
    local n
    for n in "$CLUSTER_PORT_BASE" "$CLUSTER_CH_SHARDS" "$CLUSTER_CH_REPLICAS" "$CLUSTER_INSTANCES"; do
        [[ $n =~ ^[0-9]+$ ]] || { echo "cluster settings must be numbers, got '$n'"; return 1; }
    done
    ((CLUSTER_PORT_BASE >= 1024 && CLUSTER_PORT_BASE + 545 <= 65535)) ||
        { echo "MORAINE_CLUSTER_PORT_BASE must be within 1024..64990, got $CLUSTER_PORT_BASE"; return 1; }
    ((CLUSTER_CH_SHARDS >= 1 && CLUSTER_CH_REPLICAS >= 1 && CLUSTER_CH_SHARDS * CLUSTER_CH_REPLICAS <= 6)) ||
        { echo "ClickHouse shards x replicas must be 1..6 servers, got ${CLUSTER_CH_SHARDS}x${CLUSTER_CH_REPLICAS}"; return 1; }
    ((CLUSTER_INSTANCES >= 1 && CLUSTER_INSTANCES <= 9)) ||
        { echo "MORAINE_CLUSTER_INSTANCES must be 1..9, got $CLUSTER_INSTANCES"; return 1; }
}

cluster_ch_nodes() { echo $((CLUSTER_CH_SHARDS * CLUSTER_CH_REPLICAS)); }
# Servers 1..R are shard 1's replicas, R+1..2R shard 2's, and so on.
cluster_ch_shard() { echo $((($1 - 1) / CLUSTER_CH_REPLICAS + 1)); }

port_ch_native() { echo $((CLUSTER_PORT_BASE + 10 * $1)); }
port_ch_http() { echo $((CLUSTER_PORT_BASE + 10 * $1 + 1)); }
port_ch_interserver() { echo $((CLUSTER_PORT_BASE + 10 * $1 + 2)); }
port_api() { echo $((CLUSTER_PORT_BASE + 80)); }
port_query() { echo $((CLUSTER_PORT_BASE + 80 + $1)); }
port_kafka() { echo $((CLUSTER_PORT_BASE + 100 + 10 * $1)); }
port_kafka_controller() { echo $((CLUSTER_PORT_BASE + 101 + 10 * $1)); }
port_zookeeper() { echo $((CLUSTER_PORT_BASE + 181)); }
port_devchain() { echo $((CLUSTER_PORT_BASE + 545)); }

# port_ops SERVICE N
port_ops() {
    local s
    case $1 in
    ingest) s=1 ;;
    processor) s=2 ;;
    query) s=3 ;;
    delivery) s=4 ;;
    *) return 1 ;;
    esac
    echo $((CLUSTER_PORT_BASE + 200 + 10 * s + $2))
}

# The comma-separated address lists the services are given.
cluster_clickhouse_addrs() {
    local n out=()
    for ((n = 1; n <= $(cluster_ch_nodes); n++)); do out+=("127.0.0.1:$(port_ch_native "$n")"); done
    (IFS=,; echo "${out[*]}")
}
cluster_kafka_brokers() {
    local n out=()
    for ((n = 1; n <= CLUSTER_KAFKA_NODES; n++)); do out+=("127.0.0.1:$(port_kafka "$n")"); done
    (IFS=,; echo "${out[*]}")
}
