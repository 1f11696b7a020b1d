# shellcheck shell=bash
# The cluster profile of stack.sh (`stack.sh cluster ...`), sourced by it: the same engines as the single-node
# stack, as a cluster on one machine, for `make cluster` and the fault suite.
#
#   zookeeper        Apache ZooKeeper 3.9.3 (Maven Central jars), standalone: ClickHouse 18.16 has no keeper
#   clickhouse-N     ClickHouse 18.16 servers forming cluster "moraine" (1 shard x 2 replicas by default)
#   kafka-1..3       Apache Kafka KRaft nodes, each broker and controller, replication factor 3, min ISR 2
#   nginx            Debian's nginx in front of the query instances that run.sh starts
#
# Ports: cluster-layout.sh. Everything lives under <state>/cluster/<node>/ (config, data, logs, pid file);
# the Kafka jars are the single-node stack's (<state>/kafka/libs), the ZooKeeper jars are kept in
# <state>/cluster/zookeeper/libs across resets. It uses stack.sh's helpers (launch, find_pid, stop_service,
# render, apt_install, the ClickHouse and Kafka installs) and its own lock, so the single-node stack and
# the cluster never wait on each other.

# shellcheck source=deploy/stack/cluster-layout.sh
source "$SCRIPT_DIR/cluster-layout.sh"

readonly ZOOKEEPER_VERSION=3.9.3
CLUSTER_KAFKA_HEAP=${MORAINE_CLUSTER_KAFKA_HEAP:-384m}

cluster_resolve_dirs() {
    resolve_state_dir
    CLUSTER_DIR=$STATE_DIR/cluster
    ZK_DIR=$CLUSTER_DIR/zookeeper
    ZK_LIBS=$ZK_DIR/libs
    NGINX_DIR=$CLUSTER_DIR/nginx
    mkdir -p "$CLUSTER_DIR"
}

# fd 8, not stack.sh's fd 9: a `stack.sh start` of the single-node stack does not wait for a cluster start.
cluster_take_lock() {
    exec 8>"$CLUSTER_DIR/.stack.lock"
    if ! flock -n 8; then
        say "waiting for another stack.sh cluster on $CLUSTER_DIR ..."
        flock -w 900 8 || die "another stack.sh cluster still holds $CLUSTER_DIR/.stack.lock after 15 min"
    fi
}

# cluster_nodes: every node, in start order.
cluster_nodes() {
    local n out=(zookeeper)
    for ((n = 1; n <= $(cluster_ch_nodes); n++)); do out+=("clickhouse-$n"); done
    for ((n = 1; n <= CLUSTER_KAFKA_NODES; n++)); do out+=("kafka-$n"); done
    out+=(nginx)
    echo "${out[@]}"
}

# node_matches ARG NODE: ARG names NODE, or its kind (clickhouse, kafka).
node_matches() {
    [[ $1 == "$2" || ($1 == clickhouse && $2 == clickhouse-*) || ($1 == kafka && $2 == kafka-*) ]]
}

# cluster_select ARG...: the nodes named (none: all), in start order.
cluster_select() {
    local all arg node out=() found
    read -r -a all <<<"$(cluster_nodes)"
    (($#)) || { echo "${all[@]}"; return 0; }
    for arg in "$@"; do
        found=0
        for node in "${all[@]}"; do node_matches "$arg" "$node" && found=1; done
        ((found)) || die "unknown cluster node '$arg' (nodes: ${all[*]}; or clickhouse, kafka)"
    done
    for node in "${all[@]}"; do
        for arg in "$@"; do
            if node_matches "$arg" "$node"; then
                out+=("$node")
                break
            fi
        done
    done
    echo "${out[@]}"
}

node_dir() {
    case $1 in
    zookeeper) echo "$ZK_DIR" ;;
    nginx) echo "$NGINX_DIR" ;;
    *) echo "$CLUSTER_DIR/$1" ;;
    esac
}

node_pidfile() {
    case $1 in
    zookeeper) echo "$ZK_DIR/zookeeper.pid" ;;
    clickhouse-*) echo "$CLUSTER_DIR/$1/clickhouse-server.pid" ;;
    kafka-*) echo "$CLUSTER_DIR/$1/kafka.pid" ;;
    nginx) echo "$NGINX_DIR/nginx.pid" ;;
    esac
}

# node_pid NAME: the node's running process (by its config path on the command line; see find_pid).
node_pid() {
    local dir pidfile
    dir=$(node_dir "$1")
    pidfile=$(node_pidfile "$1")
    case $1 in
    zookeeper) find_pid "$pidfile" QuorumPeerMain "$dir/zoo.cfg" ;;
    clickhouse-*) find_pid "$pidfile" clickhouse-server "--config-file=$dir/config.xml" ;;
    kafka-*) find_pid "$pidfile" kafka.Kafka "$dir/server.properties" ;;
    # nginx rewrites its process title to "nginx: master process <original command line>".
    nginx) find_pid "$pidfile" "nginx: master process" "$dir/nginx.conf" ;;
    esac
}

# stop_service takes a function without arguments.
current_node_pid() { node_pid "$CURRENT_NODE"; }

node_index() { echo "${1##*-}"; }

# node_ports NAME: the ports a node listens on, "port description" per line.
node_ports() {
    local n
    case $1 in
    zookeeper) echo "$(port_zookeeper) zookeeper" ;;
    clickhouse-*)
        n=$(node_index "$1")
        printf '%s %s\n' "$(port_ch_native "$n")" "$1 native" "$(port_ch_http "$n")" "$1 http" \
            "$(port_ch_interserver "$n")" "$1 interserver"
        ;;
    kafka-*)
        n=$(node_index "$1")
        printf '%s %s\n' "$(port_kafka "$n")" "$1 broker" "$(port_kafka_controller "$n")" "$1 controller"
        ;;
    nginx) echo "$(port_api) nginx" ;;
    esac
}

node_require_ports_free() {
    local port what
    while read -r port what; do
        require_port_free "$port" "$what, MORAINE_CLUSTER_PORT_BASE=$CLUSTER_PORT_BASE"
    done < <(node_ports "$1")
}

# ---------------------------------------------------------------------------------------------------------
# Install

zk_install() {
    command -v java >/dev/null 2>&1 || apt_install openjdk-17-jre-headless
    local marker=$ZK_LIBS/.zookeeper-version
    if [[ -f $marker && $(<"$marker") == "$ZOOKEEPER_VERSION" ]]; then
        say "zookeeper: jars for $ZOOKEEPER_VERSION already in $ZK_LIBS"
        return 0
    fi
    command -v mvn >/dev/null 2>&1 || apt_install maven
    mkdir -p "$ZK_DIR"
    local tmp=$ZK_DIR/libs.tmp logf=$ZK_DIR/mvn.log
    rm -rf "$tmp"
    say "zookeeper: fetching org.apache.zookeeper:zookeeper:$ZOOKEEPER_VERSION and dependencies from Maven Central"
    if ! mvn -B -U -f "$SCRIPT_DIR/zookeeper-pom.xml" "-Dzookeeper.version=$ZOOKEEPER_VERSION" \
        dependency:copy-dependencies -DincludeScope=runtime "-DoutputDirectory=$tmp" >"$logf" 2>&1; then
        local reason
        reason=$(grep -m1 -E '^\[ERROR\] .+' "$logf" | sed -e 's/^\[ERROR\] //' | cut -c1-600) || true
        rm -rf "$tmp"
        die "mvn could not fetch ZooKeeper $ZOOKEEPER_VERSION from Maven Central: ${reason:-see $logf} (full output: $logf)"
    fi
    [[ -f $tmp/zookeeper-$ZOOKEEPER_VERSION.jar ]] || die "mvn finished but $tmp/zookeeper-$ZOOKEEPER_VERSION.jar is missing (full output: $logf)"
    rm -rf "$ZK_LIBS"
    mv "$tmp" "$ZK_LIBS"
    printf '%s\n' "$ZOOKEEPER_VERSION" >"$marker"
    say "zookeeper: $(find "$ZK_LIBS" -name '*.jar' | wc -l) jars in $ZK_LIBS"
}

nginx_install() {
    if pkg_installed nginx; then
        say "nginx: package $(dpkg-query -W -f='${Version}' nginx) already installed"
        return 0
    fi
    # apt_install keeps the package's postinst from starting a system-wide nginx (policy-rc.d).
    apt_install nginx
    say "nginx: installed package $(dpkg-query -W -f='${Version}' nginx)"
}

# The single-node stack's Kafka install (java, the jars in <state>/kafka/libs), under the single-node lock:
# a `stack.sh install` running at the same time would download into the same directory.
cluster_kafka_install() {
    take_lock
    kafka_install
    [[ -f $KAFKA_DIR/tools-log4j2.properties ]] || render kafka-tools-log4j2.properties "$KAFKA_DIR/tools-log4j2.properties"
    exec 9>&-
}

# node_install NAME: once per kind and run (three Kafka nodes share one install).
declare -gA KIND_INSTALLED=()
node_install() {
    local kind=${1%%-*}
    [[ -n ${KIND_INSTALLED[$kind]+x} ]] && return 0
    KIND_INSTALLED[$kind]=1
    case $1 in
    zookeeper) zk_install ;;
    clickhouse-*) ch_install ;;
    kafka-*) cluster_kafka_install ;;
    nginx) nginx_install ;;
    esac
}

# ---------------------------------------------------------------------------------------------------------
# Configuration, rendered on every start from the templates.

zk_write_config() {
    mkdir -p "$ZK_DIR"/{data,logs}
    render zookeeper.cfg "$ZK_DIR/zoo.cfg" ZK_DIR "$ZK_DIR" ZK_PORT "$(port_zookeeper)"
    render zookeeper-logback.xml "$ZK_DIR/logback.xml" ZK_DIR "$ZK_DIR"
}

# The <shard> elements of remote_servers: shard s holds servers (s-1)*R+1 .. s*R.
ch_shards_xml() {
    local s r n xml=""
    for ((s = 1; s <= CLUSTER_CH_SHARDS; s++)); do
        xml+=$'            <shard>\n                <internal_replication>true</internal_replication>\n'
        for ((r = 1; r <= CLUSTER_CH_REPLICAS; r++)); do
            n=$(((s - 1) * CLUSTER_CH_REPLICAS + r))
            xml+="                <replica><host>127.0.0.1</host><port>$(port_ch_native "$n")</port></replica>"$'\n'
        done
        xml+=$'            </shard>\n'
    done
    printf '%s' "${xml%$'\n'}"
}

ch_node_write_config() {
    local name=$1 n dir
    n=$(node_index "$name")
    dir=$(node_dir "$name")
    mkdir -p "$dir"/{data,tmp,user_files,format_schemas,logs,config.d}
    render clickhouse-config.xml "$dir/config.xml" \
        CH_DIR "$dir" CH_TCP_PORT "$(port_ch_native "$n")" CH_HTTP_PORT "$(port_ch_http "$n")"
    render clickhouse-users.xml "$dir/users.xml"
    render clickhouse-cluster.xml "$dir/config.d/cluster.xml" \
        CH_INTERSERVER_PORT "$(port_ch_interserver "$n")" ZK_PORT "$(port_zookeeper)" CLUSTER_NAME "$CLUSTER_NAME" \
        CH_SHARD "$(cluster_ch_shard "$n")" CH_REPLICA "$name" CH_SHARDS_XML "$(ch_shards_xml)"
}

kafka_voters() {
    local n out=()
    for ((n = 1; n <= CLUSTER_KAFKA_NODES; n++)); do out+=("$n@127.0.0.1:$(port_kafka_controller "$n")"); done
    (IFS=,; echo "${out[*]}")
}

kafka_node_write_config() {
    local name=$1 n dir
    n=$(node_index "$name")
    dir=$(node_dir "$name")
    mkdir -p "$dir"/{data,logs}
    render kafka-cluster-server.properties "$dir/server.properties" \
        NODE_ID "$n" VOTERS "$(kafka_voters)" KAFKA_DIR "$dir" \
        KAFKA_PORT "$(port_kafka "$n")" KAFKA_CONTROLLER_PORT "$(port_kafka_controller "$n")"
    render kafka-log4j2.properties "$dir/log4j2.properties"
}

nginx_write_config() {
    local n servers=""
    mkdir -p "$NGINX_DIR"/{logs,tmp}
    for ((n = 1; n <= CLUSTER_INSTANCES; n++)); do
        servers+="        server 127.0.0.1:$(port_query "$n") max_fails=1 fail_timeout=5s;"$'\n'
    done
    render nginx.conf "$NGINX_DIR/nginx.conf" NGINX_DIR "$NGINX_DIR" API_PORT "$(port_api)" \
        UPSTREAM_SERVERS "${servers%$'\n'}"
}

# All three nodes are formatted with one cluster id, kept in <state>/cluster/kafka.cluster-id. A formatted
# store (meta.properties) is never formatted again, so a restart keeps its data.
kafka_node_format() {
    local dir=$1 id_file=$CLUSTER_DIR/kafka.cluster-id id logf=$1/logs/format.log
    [[ -f $dir/data/meta.properties ]] && return 0
    if [[ ! -s $id_file ]]; then
        kafka_java kafka.tools.StorageTool random-uuid >"$id_file.tmp" 2>"$logf" ||
            { log_tail "$logf"; die "kafka: could not generate a cluster id"; }
        mv -f "$id_file.tmp" "$id_file"
    fi
    id=$(tr -d '[:space:]' <"$id_file")
    if ! kafka_java kafka.tools.StorageTool format --ignore-formatted \
        --cluster-id "$id" --config "$dir/server.properties" >"$logf" 2>&1; then
        log_tail "$logf"
        die "kafka: formatting storage in $dir/data failed (log: $logf)"
    fi
}

# node_write_config NAME: render the node's configuration (every start does; `config` does only this).
node_write_config() {
    case $1 in
    zookeeper) zk_write_config ;;
    clickhouse-*) ch_node_write_config "$1" ;;
    kafka-*) kafka_node_write_config "$1" ;;
    nginx) nginx_write_config ;;
    esac
}

# ---------------------------------------------------------------------------------------------------------
# Start, wait, stop, kill, status. Starting is in two steps, launch then wait, because one KRaft node alone
# never gets ready: it needs a quorum of the three controllers, so all of them are launched before any wait.

declare -gA NODE_LAUNCHED_PID=() NODE_LOG_OFFSET=()

# node_launch NAME: start the node unless it runs (then it is not waited for).
node_launch() {
    local name=$1 pid dir pidfile
    dir=$(node_dir "$name")
    pidfile=$(node_pidfile "$name")
    if pid=$(node_pid "$name"); then
        say "$name: already running (pid $pid)"
        return 0
    fi
    node_install "$name"
    node_require_ports_free "$name"
    node_write_config "$name"
    case $name in
    zookeeper)
        launch "$dir" "$pidfile" "$dir/logs/zookeeper.out" \
            java -Xms64m -Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:+ExitOnOutOfMemoryError \
            -Djava.awt.headless=true "-Dlogback.configurationFile=$dir/logback.xml" \
            -cp "$ZK_LIBS/*" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg"
        ;;
    clickhouse-*)
        launch "$dir" "$pidfile" "$dir/logs/stdout.log" clickhouse-server "--config-file=$dir/config.xml"
        ;;
    kafka-*)
        kafka_node_format "$dir"
        local log=$dir/logs/server.log
        NODE_LOG_OFFSET[$name]=0
        [[ -f $log ]] && NODE_LOG_OFFSET[$name]=$(stat -c %s "$log")
        launch "$dir" "$pidfile" "$dir/logs/kafka.out" \
            java "-Xms$CLUSTER_KAFKA_HEAP" "-Xmx$CLUSTER_KAFKA_HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
            -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true ${KAFKA_JVM_OPTS[@]+"${KAFKA_JVM_OPTS[@]}"} \
            "-Dkafka.logs.dir=$dir/logs" "-Dlog4j2.configurationFile=$dir/log4j2.properties" \
            -cp "$KAFKA_LIBS/*" kafka.Kafka "$dir/server.properties"
        ;;
    nginx)
        # -e: the error log before the config is read (the default, /var/log/nginx/error.log, may not exist).
        launch "$dir" "$pidfile" "$dir/logs/nginx.out" \
            nginx -p "$dir" -c "$dir/nginx.conf" -e "$dir/logs/error.log" -g 'daemon off;'
        ;;
    esac
    NODE_LAUNCHED_PID[$name]=$LAUNCHED_PID
}

zk_ruok() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1 && printf ruok >&3 && cat <&3" 2>/dev/null; }
ch_node_http() { curl -fsS --max-time 2 "http://127.0.0.1:$1/?query=$2" 2>/dev/null; }

# node_answers NAME: the node does its job (not only runs).
node_answers() {
    local n dir offset log
    case $1 in
    zookeeper) [[ $(zk_ruok "$(port_zookeeper)" || true) == imok ]] ;;
    clickhouse-*) [[ $(ch_node_http "$(port_ch_http "$(node_index "$1")")" 'SELECT%201' || true) == 1 ]] ;;
    kafka-*)
        n=$(node_index "$1")
        tcp_open "$(port_kafka "$n")" || return 1
        # While starting: it registered with the quorum and was unfenced (logged after launch).
        [[ -n ${NODE_LOG_OFFSET[$1]+x} ]] || return 0
        dir=$(node_dir "$1")
        log=$dir/logs/server.log
        offset=${NODE_LOG_OFFSET[$1]}
        [[ -f $log ]] || return 1
        (($(stat -c %s "$log") < offset)) && NODE_LOG_OFFSET[$1]=0 && offset=0
        tail -c +"$((offset + 1))" "$log" | grep -c 'Kafka Server started' >/dev/null
        ;;
    nginx) tcp_open "$(port_api)" ;;
    esac
}

# node_describe NAME: where to reach it, for status lines.
node_describe() {
    local n
    case $1 in
    zookeeper) echo "127.0.0.1:$(port_zookeeper)" ;;
    clickhouse-*)
        n=$(node_index "$1")
        echo "shard $(cluster_ch_shard "$n"), native 127.0.0.1:$(port_ch_native "$n"), http 127.0.0.1:$(port_ch_http "$n")"
        ;;
    kafka-*)
        n=$(node_index "$1")
        echo "broker 127.0.0.1:$(port_kafka "$n"), controller 127.0.0.1:$(port_kafka_controller "$n")"
        ;;
    nginx) echo "API http://127.0.0.1:$(port_api) -> query on $(for ((n = 1; n <= CLUSTER_INSTANCES; n++)); do printf '%s ' "$(port_query "$n")"; done | sed 's/ $//')" ;;
    esac
}

node_logs() {
    local dir
    dir=$(node_dir "$1")
    case $1 in
    zookeeper) echo "$dir/logs/zookeeper.log $dir/logs/zookeeper.out" ;;
    clickhouse-*) echo "$dir/logs/clickhouse-server.err.log $dir/logs/stdout.log" ;;
    kafka-*) echo "$dir/logs/server.log $dir/logs/kafka.out" ;;
    nginx) echo "$dir/logs/error.log $dir/logs/nginx.out" ;;
    esac
}

node_wait() {
    local name=$1 pid=${NODE_LAUNCHED_PID[$1]:-} timeout=$READY_TIMEOUT_S f started=$SECONDS
    [[ -n $pid ]] || return 0
    [[ $name == kafka-* ]] && timeout=$KAFKA_READY_TIMEOUT_S
    [[ $name == clickhouse-* ]] && timeout=$CH_READY_TIMEOUT_S
    CURRENT_NODE=$name
    while ((SECONDS - started < timeout)); do
        if ! still_running pid current_node_pid; then
            for f in $(node_logs "$name"); do log_tail "$f" 20; done
            die "$name: exited during startup (logs: $(node_dir "$name")/logs)"
        fi
        if node_answers "$name"; then
            unset "NODE_LAUNCHED_PID[$name]" "NODE_LOG_OFFSET[$name]"
            say "$name: started (pid $pid, $(node_describe "$name"))"
            return 0
        fi
        sleep 0.3
    done
    for f in $(node_logs "$name"); do log_tail "$f" 30; done
    die "$name: not ready within ${timeout}s (pid $pid still running; logs: $(node_dir "$name")/logs)"
}

node_stop() {
    CURRENT_NODE=$1
    stop_service "$1" current_node_pid "$(node_pidfile "$1")"
}

# cluster_stop NODE...: stop in reverse start order. The Kafka nodes stop together: one by one, the last
# would lose its controller quorum (two of three voters gone) halfway through its controlled shutdown and
# hang until SIGKILL.
cluster_stop() {
    local node kafka=()
    for node in $(reversed "$@"); do
        case $node in
        kafka-*) kafka+=("$node") ;;
        *)
            stop_together ${kafka[@]+"${kafka[@]}"}
            kafka=()
            node_stop "$node"
            ;;
        esac
    done
    stop_together ${kafka[@]+"${kafka[@]}"}
}

stop_together() {
    local n
    for n in "$@"; do node_stop "$n" & done
    wait
}

# node_kill NAME: SIGKILL, as a crash would. The whole process group goes (launch made the node a session
# leader), so nginx's worker does not outlive its master and keep serving.
node_kill() {
    local name=$1 pid stat pgrp
    if ! pid=$(node_pid "$name"); then
        say "$name: not running"
        return 0
    fi
    stat=$(<"/proc/$pid/stat") || true
    stat=${stat##*) }
    read -r _ _ pgrp _ <<<"$stat"
    if [[ $pgrp == "$pid" ]]; then
        kill -KILL -- "-$pid" 2>/dev/null || true
    else
        kill -KILL "$pid" 2>/dev/null || true
    fi
    while pid_alive "$pid"; do sleep 0.05; done
    rm -f "$(node_pidfile "$name")"
    say "$name: killed (pid $pid)"
}

node_status() {
    local name=$1 pid
    if pid=$(node_pid "$name"); then
        if node_answers "$name"; then
            say "$name: running (pid $pid, $(node_describe "$name"))"
            return 0
        fi
        say "$name: running but not answering (pid $pid, $(node_describe "$name"))"
        return 3
    fi
    say "$name: stopped ($(node_describe "$name"))"
    return 3
}

# ---------------------------------------------------------------------------------------------------------
# Commands

cluster_print_env() {
    printf 'export MORAINE_CLICKHOUSE_ADDR=%s\n' "$(cluster_clickhouse_addrs)"
    printf 'export MORAINE_CLICKHOUSE_CLUSTER=%q\n' "$CLUSTER_NAME"
    printf 'export MORAINE_CLICKHOUSE_COMPRESSION=none\n'
    printf 'export MORAINE_KAFKA_BROKERS=%s\n' "$(cluster_kafka_brokers)"
    printf 'export MORAINE_STATE_DIR=%q\n' "$STATE_DIR"
    # Not service flags: where the cluster's API and ZooKeeper are, for tests and tools.
    printf 'export MORAINE_CLUSTER_API_URL=%q\n' "http://127.0.0.1:$(port_api)"
    printf 'export MORAINE_CLUSTER_ZOOKEEPER=%q\n' "127.0.0.1:$(port_zookeeper)"
    # The addresses nginx forwards to: where the query instances listen.
    local n addrs=()
    for ((n = 1; n <= CLUSTER_INSTANCES; n++)); do addrs+=("127.0.0.1:$(port_query "$n")"); done
    printf 'export MORAINE_CLUSTER_QUERY_ADDRS=%s\n' "$(IFS=,; echo "${addrs[*]}")"
}

cluster_usage() {
    cat >&2 <<'EOF'
usage: stack.sh cluster install|start|stop|kill|status|config [NODE...]
       stack.sh cluster reset|env|nodes
NODE: zookeeper, clickhouse-N, kafka-N, nginx, or clickhouse / kafka for all of a kind (default: every node).
EOF
    exit 2
}

cluster_main() {
    local cmd=${1:-} msg selected nodes node rc=0
    (($#)) && shift
    msg=$(cluster_layout_check) || die "$msg"
    case $cmd in
    install | start | stop | kill | status | config | reset | env | nodes) ;;
    *) cluster_usage ;;
    esac
    cluster_resolve_dirs
    case $cmd in
    env) cluster_print_env; return 0 ;;
    nodes) cluster_nodes | tr ' ' '\n'; return 0 ;;
    esac
    # Not `read <<<"$(...)"`: that would swallow cluster_select's failure on an unknown name.
    selected=$(cluster_select "$@") || exit
    read -r -a nodes <<<"$selected"
    if [[ $cmd == status ]]; then
        for node in "${nodes[@]}"; do node_status "$node" || rc=3; done
        return "$rc"
    fi
    cluster_take_lock
    case $cmd in
    install)
        for node in "${nodes[@]}"; do node_install "$node"; done
        ;;
    config)
        # What start would run with, without starting: to read, or to compare with a real cluster's.
        for node in "${nodes[@]}"; do
            node_write_config "$node"
            say "$node: $(node_dir "$node")"
        done
        ;;
    start)
        for node in "${nodes[@]}"; do
            node_launch "$node"
            # ClickHouse reads its replicated tables' state from ZooKeeper as it starts.
            [[ $node == zookeeper ]] && node_wait zookeeper
        done
        for node in "${nodes[@]}"; do node_wait "$node"; done
        ;;
    stop)
        cluster_stop "${nodes[@]}"
        ;;
    kill)
        (($#)) || die "kill needs node names (stack.sh cluster kill kafka-2): it never kills the whole cluster by default"
        for node in "${nodes[@]}"; do node_kill "$node"; done
        ;;
    reset)
        (($#)) && die "reset takes no node: it deletes the whole cluster's data (replicas and ZooKeeper belong together)"
        cluster_stop "${nodes[@]}"
        # Keeps the ZooKeeper jars (the Kafka jars are the single-node stack's).
        find "$CLUSTER_DIR" -mindepth 1 -maxdepth 1 ! -name zookeeper ! -name .stack.lock -exec rm -rf {} +
        find "$ZK_DIR" -mindepth 1 -maxdepth 1 ! -name libs -exec rm -rf {} + 2>/dev/null || true
        say "cluster: data removed ($CLUSTER_DIR), jars kept"
        ;;
    esac
}
