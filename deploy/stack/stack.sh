#!/usr/bin/env bash
# Local moraine stack: ClickHouse 18.16 (Debian package) and Apache Kafka (KRaft, jars from Maven Central),
# run as plain background processes on 127.0.0.1. No Docker, no systemd: neither exists on our machines.
#
# Usage: stack.sh install|start|stop|status|reset [clickhouse|kafka]
#        stack.sh env
#        stack.sh kafka-run-class CLASS [ARGS...]   (a Kafka tool with the downloaded jars, e.g.
#                                                    org.apache.kafka.tools.TopicCommand --bootstrap-server ...)
#        stack.sh cluster install|start|stop|kill|status|config|reset|env|nodes [NODE...]
#                                                   (the local cluster: ZooKeeper, replicated ClickHouse,
#                                                    3 Kafka nodes, nginx; see cluster.sh)
#
# Everything (generated configs, data, logs, pid files, the jar cache) lives under one state dir.
# Environment:
#   MORAINE_STATE_DIR              default <repo root>/.moraine
#   MORAINE_CLICKHOUSE_PORT        native TCP port, default 9000
#   MORAINE_CLICKHOUSE_HTTP_PORT   HTTP port, default 8123
#   MORAINE_KAFKA_PORT             broker port, default 9092
#   MORAINE_KAFKA_CONTROLLER_PORT  KRaft controller port, default 9093
#   MORAINE_KAFKA_VERSION          Apache Kafka version from Maven Central, default below
#   MORAINE_KAFKA_HEAP             broker -Xmx, default 512m
#   MORAINE_KAFKA_JVM_OPTS         more broker JVM options, default -XX:TieredStopAtLevel=1 (set it empty for none)
set -euo pipefail
# Bash 5.2 would expand '&' in ${var//pat/repl}; templates must be copied literally.
shopt -u patsub_replacement 2>/dev/null || true

readonly DEFAULT_KAFKA_VERSION=4.3.1
readonly READY_TIMEOUT_S=60       # how long start waits for a service to answer
readonly KAFKA_READY_TIMEOUT_S=90 # the JVM plus a KRaft election take longer on 2 cores
# A ClickHouse server loads every table's parts (and, on a cluster, its replicas' state in ZooKeeper) before it
# answers, which takes minutes with many tables; one that fails exits, and start says so at once.
readonly CH_READY_TIMEOUT_S=300
readonly STOP_TIMEOUT_S=20        # SIGTERM grace period before SIGKILL

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd -P)
TEMPLATES=$SCRIPT_DIR/templates

STATE_DIR=${MORAINE_STATE_DIR:-$REPO_ROOT/.moraine}
CH_TCP_PORT=${MORAINE_CLICKHOUSE_PORT:-9000}
CH_HTTP_PORT=${MORAINE_CLICKHOUSE_HTTP_PORT:-8123}
KAFKA_PORT=${MORAINE_KAFKA_PORT:-9092}
KAFKA_CONTROLLER_PORT=${MORAINE_KAFKA_CONTROLLER_PORT:-9093}
KAFKA_VERSION=${MORAINE_KAFKA_VERSION:-$DEFAULT_KAFKA_VERSION}
KAFKA_HEAP=${MORAINE_KAFKA_HEAP:-512m}
# C1 only: on a 2-core machine the C2 compiler kept compiling for every test run's new topics, burning more
# CPU than the broker's own work (measured: 2.9 s of compiler threads per pipeline benchmark run, against
# 0.3 s of request handling). A long-lived production broker wants C2; this stack is for development and CI.
read -r -a KAFKA_JVM_OPTS <<<"${MORAINE_KAFKA_JVM_OPTS--XX:TieredStopAtLevel=1}"

# ---------------------------------------------------------------------------------------------------------
# Output helpers. Progress goes to stdout, one line per step; errors to stderr.

say() { printf '%s\n' "$*"; }
die() {
    printf 'stack.sh: %s\n' "$*" >&2
    exit 1
}

# Absolute state dir even if MORAINE_STATE_DIR was given relative to the caller's cwd.
resolve_state_dir() {
    mkdir -p "$STATE_DIR" || die "cannot create state dir $STATE_DIR"
    STATE_DIR=$(cd "$STATE_DIR" && pwd -P)
    CH_DIR=$STATE_DIR/clickhouse
    KAFKA_DIR=$STATE_DIR/kafka
    KAFKA_LIBS=$KAFKA_DIR/libs
    CH_PIDFILE=$CH_DIR/clickhouse-server.pid
    KAFKA_PIDFILE=$KAFKA_DIR/kafka.pid
}

check_port_number() {
    local name=$1 value=$2
    if ! [[ $value =~ ^[0-9]+$ ]] || ((value < 1 || value > 65535)); then
        die "$name must be a TCP port number, got '$value'"
    fi
}

check_settings() {
    check_port_number MORAINE_CLICKHOUSE_PORT "$CH_TCP_PORT"
    check_port_number MORAINE_CLICKHOUSE_HTTP_PORT "$CH_HTTP_PORT"
    check_port_number MORAINE_KAFKA_PORT "$KAFKA_PORT"
    check_port_number MORAINE_KAFKA_CONTROLLER_PORT "$KAFKA_CONTROLLER_PORT"
    [[ $KAFKA_VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "MORAINE_KAFKA_VERSION must look like 4.3.1, got '$KAFKA_VERSION'"
}

# Serialise install/start/stop/reset: two of them racing on the same state dir would format twice or start
# two servers. The lock fd (9) is closed for the servers we launch, or they would hold it forever.
take_lock() {
    exec 9>"$STATE_DIR/.stack.lock"
    if ! flock -n 9; then
        say "waiting for another stack.sh on $STATE_DIR ..."
        flock -w 900 9 || die "another stack.sh still holds $STATE_DIR/.stack.lock after 15 min"
    fi
}

# Copy a template, replacing @KEY@ placeholders. Written to a temp file and renamed, so a crash never leaves a
# half-written config behind.
render() {
    local template=$1 out=$2
    shift 2
    local text
    text=$(<"$TEMPLATES/$template")
    while (($#)); do
        text=${text//"@$1@"/"$2"}
        shift 2
    done
    printf '%s\n' "$text" >"$out.tmp"
    mv -f "$out.tmp" "$out"
}

# ---------------------------------------------------------------------------------------------------------
# Processes. A pid file alone is not trusted: after a crash or a reboot the pid may belong to something else.
# A process is ours when its command line contains our config path (unique per state dir). If the pid file is
# stale or missing we look the process up in /proc, so a lost pid file never leaves an orphan we cannot stop.

# read_cmdline PID: set CMDLINE to the process's arguments joined by spaces ("" if it is gone: a process may
# vanish between listing /proc and reading it). No subshell: find_pid calls this for every process.
read_cmdline() {
    local -a args=()
    { mapfile -d '' args <"/proc/$1/cmdline"; } 2>/dev/null || true
    CMDLINE=${args[*]-}
    CMDLINE_PROG=${args[0]-}
    CMDLINE_PROG=${CMDLINE_PROG##*/}
}

# cmdline_has NEEDLE...: CMDLINE contains every needle.
cmdline_has() {
    local needle
    [[ -n $CMDLINE ]] || return 1
    for needle in "$@"; do [[ $CMDLINE == *"$needle"* ]] || return 1; done
}

# find_pid PIDFILE NEEDLE...: print the pid of our process (all needles in its command line), or fail.
find_pid() {
    local pidfile=$1 pid dir
    shift
    if [[ -s $pidfile ]]; then
        pid=$(<"$pidfile")
        if [[ $pid =~ ^[0-9]+$ ]]; then
            read_cmdline "$pid"
            if cmdline_has "$@"; then
                printf '%s\n' "$pid"
                return 0
            fi
        fi
    fi
    for dir in /proc/[0-9]*; do
        pid=${dir#/proc/}
        [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
        read_cmdline "$pid"
        cmdline_has "$@" || continue
        # A shell or wrapper whose command line merely mentions the path (`bash -c '... config.xml'`) is not it.
        case $CMDLINE_PROG in bash | sh | dash | zsh | timeout | nohup | setsid) continue ;; esac
        { printf '%s\n' "$pid" >"$pidfile"; } 2>/dev/null || true
        printf '%s\n' "$pid"
        return 0
    done
    return 1
}

ch_pid() { find_pid "$CH_PIDFILE" clickhouse-server "--config-file=$CH_DIR/config.xml"; }
kafka_pid() { find_pid "$KAFKA_PIDFILE" kafka.Kafka "$KAFKA_DIR/server.properties"; }

# Who listens on a port? Prints "name pid N" or "unknown process" if something answers; fails if free.
port_user() {
    local port=$1 line
    if command -v ss >/dev/null 2>&1; then
        line=$(ss -Hltnp "sport = :$port" 2>/dev/null | head -n1 || true)
        if [[ -n $line ]]; then
            if [[ $line =~ \(\(\"([^\"]+)\",pid=([0-9]+) ]]; then
                printf '%s pid %s\n' "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
            else
                printf 'unknown process\n'
            fi
            return 0
        fi
        return 1
    fi
    # No iproute2: fall back to connecting.
    tcp_open "$port" && { printf 'unknown process\n'; return 0; }
    return 1
}

tcp_open() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

require_port_free() {
    local port=$1 what=$2 user
    if user=$(port_user "$port"); then
        die "port $port ($what) already in use by another process: $user. Stop it or set the MORAINE_*_PORT variables."
    fi
}

# pid_alive PID: the process exists and is not a zombie (an exited child stays in /proc until reaped).
pid_alive() {
    local stat
    { stat=$(<"/proc/$1/stat"); } 2>/dev/null || return 1
    stat=${stat##*) }
    [[ ${stat%% *} != Z ]]
}

# launch DIR PIDFILE OUTFILE CMD...: start a server in DIR, detached from our session (setsid: a closing
# terminal or a CI job's process group kill does not take it down), stdin from /dev/null and output to a file
# (so `$(stack.sh start)` does not hang), lock fds (8: the cluster's, 9) closed. The subshell execs, so $! is the
# server's own pid. Sets LAUNCHED_PID.
launch() {
    local dir=$1 pidfile=$2 out=$3
    shift 3
    (cd "$dir" && exec setsid nohup "$@" </dev/null >>"$out" 2>&1 8>&- 9>&-) &
    LAUNCHED_PID=$!
    printf '%s\n' "$LAUNCHED_PID" >"$pidfile"
}

# still_running PID_VAR PID_FUNCTION: while a server starts, is it still there? Right after launch the process may
# not have exec'd yet (its command line is still ours), so the launched pid counts; if that one is gone, look
# the server up by command line before declaring it dead. Updates the variable named PID_VAR.
still_running() {
    local -n pid_ref=$1
    pid_alive "$pid_ref" && return 0
    pid_ref=$($2) || return 1
}

# stop_service NAME PID_FUNCTION PIDFILE: SIGTERM, wait, then SIGKILL.
stop_service() {
    local name=$1 pidfn=$2 pidfile=$3 pid i
    if ! pid=$($pidfn); then
        rm -f "$pidfile"
        say "$name: not running"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < STOP_TIMEOUT_S * 5; i++)); do
        pid_alive "$pid" || break
        sleep 0.2
    done
    if pid_alive "$pid"; then
        kill -KILL "$pid" 2>/dev/null || true
        while pid_alive "$pid"; do sleep 0.1; done
        say "$name: killed (pid $pid did not exit ${STOP_TIMEOUT_S}s after SIGTERM)"
    else
        say "$name: stopped (pid $pid)"
    fi
    rm -f "$pidfile"
}

log_tail() {
    local file=$1 n=${2:-30}
    if [[ -s $file ]]; then
        printf -- '--- last %s lines of %s ---\n' "$n" "$file" >&2
        tail -n "$n" "$file" >&2
    fi
}

# ---------------------------------------------------------------------------------------------------------
# apt

# Package lists count as fresh if one of them was updated within a week.
apt_lists_fresh() {
    [[ -n $(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' -mtime -7 -print -quit 2>/dev/null) ]]
}

pkg_installed() {
    local p
    for p in "$@"; do
        [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == "install ok installed" ]] || return 1
    done
}

pkg_known() {
    local p
    for p in "$@"; do
        apt-cache show "$p" >/dev/null 2>&1 || return 1
    done
}

APT_UPDATED=0
apt_update() {
    local logf=$STATE_DIR/apt.log
    say "apt: updating package lists"
    if ! apt-get -o DPkg::Lock::Timeout=300 update >"$logf" 2>&1; then
        die "apt-get update failed: $(grep -E '^(E|W):' "$logf" | head -n3 | tr '\n' ' ')(full output: $logf)"
    fi
    APT_UPDATED=1
}

# apt_install PKG...: install the packages that are missing. Services are kept from starting during the
# install: the Debian postinst of clickhouse-server runs `invoke-rc.d clickhouse-server start` and fails the
# install if that fails; without systemd it would otherwise start a system-wide server on our ports.
apt_install() {
    local missing=() p
    for p in "$@"; do pkg_installed "$p" || missing+=("$p"); done
    ((${#missing[@]})) || return 0
    [[ $(id -u) == 0 ]] || die "apt-get install ${missing[*]} failed: must run as root to install packages"

    if ((!APT_UPDATED)) && { ! apt_lists_fresh || ! pkg_known "${missing[@]}"; }; then
        apt_update
    fi

    local policy=/usr/sbin/policy-rc.d made_policy=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\n# temporary, from moraine deploy/stack/stack.sh: no service starts during install\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        made_policy=1
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT # also when interrupted
    fi

    local logf=$STATE_DIR/apt.log rc=0
    say "apt: installing ${missing[*]}"
    apt_get_install "${missing[@]}" >"$logf" 2>&1 || rc=$?
    if ((rc != 0 && !APT_UPDATED)); then
        # Stale lists give 404s for superseded package versions: refresh once and retry.
        apt_update
        rc=0
        apt_get_install "${missing[@]}" >"$logf" 2>&1 || rc=$?
    fi
    if ((made_policy)); then
        rm -f "$policy"
        trap - EXIT
    fi
    if ((rc != 0)); then
        die "apt-get install ${missing[*]} failed: $(grep -E '^(E|W):|dpkg: error' "$logf" | head -n3 | tr '\n' ' ')(full output: $logf)"
    fi
}

apt_get_install() {
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "$@"
}

# If a policy-rc.d that allows starts was already there, the package started the system-wide server (config in
# /etc). It would take ports 9000/8123 from ours: stop it. It is only ever started by the install itself.
stop_system_clickhouse() {
    local dir pid
    for dir in /proc/[0-9]*; do
        pid=${dir#/proc/}
        read_cmdline "$pid"
        if cmdline_has clickhouse-server /etc/clickhouse-server/config.xml; then
            say "clickhouse: stopping the system-wide server the package started (pid $pid)"
            kill -TERM "$pid" 2>/dev/null || true
        fi
    done
}

# ---------------------------------------------------------------------------------------------------------
# ClickHouse

ch_install() {
    # curl is how start knows the server answers.
    command -v curl >/dev/null 2>&1 || apt_install curl
    if pkg_installed clickhouse-server clickhouse-client; then
        say "clickhouse: package $(dpkg-query -W -f='${Version}' clickhouse-server) already installed"
        return 0
    fi
    apt_install clickhouse-server clickhouse-client
    stop_system_clickhouse
    say "clickhouse: installed package $(dpkg-query -W -f='${Version}' clickhouse-server)"
}

ch_write_config() {
    mkdir -p "$CH_DIR"/{data,tmp,user_files,format_schemas,logs}
    render clickhouse-config.xml "$CH_DIR/config.xml" \
        CH_DIR "$CH_DIR" CH_TCP_PORT "$CH_TCP_PORT" CH_HTTP_PORT "$CH_HTTP_PORT"
    render clickhouse-users.xml "$CH_DIR/users.xml"
}

ch_query_http() { curl -fsS --max-time 2 "http://127.0.0.1:$CH_HTTP_PORT/?query=$1" 2>/dev/null; }

ch_start() {
    local pid
    if pid=$(ch_pid); then
        say "clickhouse: already running (pid $pid, 127.0.0.1:$CH_TCP_PORT)"
        return 0
    fi
    ch_install
    ch_write_config
    require_port_free "$CH_TCP_PORT" "clickhouse native, MORAINE_CLICKHOUSE_PORT"
    require_port_free "$CH_HTTP_PORT" "clickhouse http, MORAINE_CLICKHOUSE_HTTP_PORT"
    # After kill -9 the data/status file is left behind; its flock died with the process, and the server
    # only logs "unclean restart" and goes on, so there is nothing to clean here.
    launch "$CH_DIR" "$CH_PIDFILE" "$CH_DIR/logs/stdout.log" \
        clickhouse-server "--config-file=$CH_DIR/config.xml"
    ch_wait_ready
}

ch_wait_ready() {
    local deadline=$((SECONDS + CH_READY_TIMEOUT_S)) pid=$LAUNCHED_PID
    while ((SECONDS < deadline)); do
        if ! still_running pid ch_pid; then
            log_tail "$CH_DIR/logs/stdout.log" 20
            log_tail "$CH_DIR/logs/clickhouse-server.err.log" 20
            die "clickhouse: server exited during startup (logs: $CH_DIR/logs)"
        fi
        if [[ $(ch_query_http 'SELECT%201' || true) == 1 ]]; then
            say "clickhouse: started (pid $pid, native 127.0.0.1:$CH_TCP_PORT, http 127.0.0.1:$CH_HTTP_PORT)"
            return 0
        fi
        sleep 0.3
    done
    log_tail "$CH_DIR/logs/clickhouse-server.log" 30
    die "clickhouse: no answer to SELECT 1 on http port $CH_HTTP_PORT within ${CH_READY_TIMEOUT_S}s (pid $pid still running; logs: $CH_DIR/logs)"
}

ch_stop() { stop_service clickhouse ch_pid "$CH_PIDFILE"; }

ch_status() {
    local pid
    if pid=$(ch_pid); then
        # Ask over HTTP: a bare TCP connect to the native port makes the server log a warning each time.
        if [[ $(ch_query_http 'SELECT%201' || true) == 1 ]]; then
            say "clickhouse: running (pid $pid, native 127.0.0.1:$CH_TCP_PORT, http 127.0.0.1:$CH_HTTP_PORT)"
            return 0
        fi
        say "clickhouse: running but not answering (pid $pid, native 127.0.0.1:$CH_TCP_PORT)"
        return 3
    fi
    say "clickhouse: stopped (native port $CH_TCP_PORT, http port $CH_HTTP_PORT)"
    return 3
}

ch_reset() {
    ch_stop
    rm -rf "$CH_DIR"
    say "clickhouse: data removed ($CH_DIR)"
}

# ---------------------------------------------------------------------------------------------------------
# Kafka

java_major() {
    java -XshowSettings:properties -version 2>&1 | sed -n '/^ *java\.specification\.version = /{s///p;q}' || true
}

# Java is needed to run the broker (also when the jars are cached, e.g. a state dir on a new machine);
# Maven only to download the jars.
kafka_install() {
    command -v java >/dev/null 2>&1 || apt_install openjdk-17-jre-headless
    local major
    major=$(java_major)
    if ! [[ $major =~ ^[0-9]+$ ]] || ((major < 17)); then
        die "Kafka $KAFKA_VERSION needs Java 17 or later, but 'java' is version '${major:-unknown}' ($(command -v java))"
    fi
    kafka_fetch_jars
}

# Jars come from Maven Central with deploy/stack/pom.xml (kafka_2.13, kafka-tools, a log4j binding and all
# their runtime dependencies). Downloaded into a temp dir and renamed, with a version marker written last, so an
# interrupted download is never mistaken for a complete one.
kafka_fetch_jars() {
    local marker=$KAFKA_LIBS/.kafka-version
    if [[ -f $marker && $(<"$marker") == "$KAFKA_VERSION" ]]; then
        say "kafka: jars for $KAFKA_VERSION already in $KAFKA_LIBS"
        return 0
    fi
    command -v mvn >/dev/null 2>&1 || apt_install maven
    mkdir -p "$KAFKA_DIR"
    local tmp=$KAFKA_DIR/libs.tmp logf=$KAFKA_DIR/mvn.log
    rm -rf "$tmp"
    say "kafka: fetching org.apache.kafka:kafka_2.13:$KAFKA_VERSION and dependencies from Maven Central"
    # -U: retry artifacts that an earlier failed attempt marked as missing in ~/.m2.
    if ! mvn -B -U -f "$SCRIPT_DIR/pom.xml" "-Dkafka.version=$KAFKA_VERSION" \
        dependency:copy-dependencies -DincludeScope=runtime "-DoutputDirectory=$tmp" >"$logf" 2>&1; then
        local reason
        # The first [ERROR] line names the artifact and the cause (not found, no network, ...).
        reason=$(grep -m1 -E '^\[ERROR\] .+' "$logf" |
            sed -e 's/^\[ERROR\] //' -e 's/ -> \[Help 1\]$//' -e 's/^Failed to execute goal on project [^:]*: //' |
            cut -c1-600) || true
        rm -rf "$tmp"
        die "mvn could not fetch org.apache.kafka:kafka_2.13:$KAFKA_VERSION from Maven Central: ${reason:-see $logf} (full output: $logf)"
    fi
    [[ -f $tmp/kafka_2.13-$KAFKA_VERSION.jar ]] || die "mvn finished but $tmp/kafka_2.13-$KAFKA_VERSION.jar is missing (full output: $logf)"
    rm -rf "$KAFKA_LIBS"
    mv "$tmp" "$KAFKA_LIBS"
    printf '%s\n' "$KAFKA_VERSION" >"$marker"
    say "kafka: $(find "$KAFKA_LIBS" -name '*.jar' | wc -l) jars in $KAFKA_LIBS"
}

kafka_write_config() {
    mkdir -p "$KAFKA_DIR"/{data,logs}
    render kafka-server.properties "$KAFKA_DIR/server.properties" \
        KAFKA_DIR "$KAFKA_DIR" KAFKA_PORT "$KAFKA_PORT" KAFKA_CONTROLLER_PORT "$KAFKA_CONTROLLER_PORT"
    render kafka-log4j2.properties "$KAFKA_DIR/log4j2.properties"
    render kafka-tools-log4j2.properties "$KAFKA_DIR/tools-log4j2.properties"
}

# Run a Kafka class (tool) with the downloaded jars and quiet logging.
kafka_java() {
    java -Xmx256m -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
        "-Dlog4j2.configurationFile=$KAFKA_DIR/tools-log4j2.properties" \
        -cp "$KAFKA_LIBS/*" "$@"
}

# KRaft needs its log dir formatted once with a cluster id. The id is kept in the state dir; meta.properties in
# the data dir marks a formatted store, so a restart (or a crash) never reformats and never loses data.
kafka_format() {
    [[ -f $KAFKA_DIR/data/meta.properties ]] && return 0
    local id_file=$KAFKA_DIR/cluster.id id logf=$KAFKA_DIR/logs/format.log
    if [[ ! -s $id_file ]]; then
        kafka_java kafka.tools.StorageTool random-uuid >"$id_file.tmp" 2>"$logf" ||
            { log_tail "$logf"; die "kafka: could not generate a cluster id"; }
        mv -f "$id_file.tmp" "$id_file"
    fi
    id=$(tr -d '[:space:]' <"$id_file")
    if ! kafka_java kafka.tools.StorageTool format --ignore-formatted \
        --cluster-id "$id" --config "$KAFKA_DIR/server.properties" >"$logf" 2>&1; then
        log_tail "$logf"
        die "kafka: formatting storage in $KAFKA_DIR/data failed (log: $logf)"
    fi
    say "kafka: formatted storage in $KAFKA_DIR/data (cluster id $id)"
}

kafka_start() {
    local pid
    if pid=$(kafka_pid); then
        say "kafka: already running (pid $pid, 127.0.0.1:$KAFKA_PORT)"
        return 0
    fi
    kafka_install
    kafka_write_config
    require_port_free "$KAFKA_PORT" "kafka broker, MORAINE_KAFKA_PORT"
    require_port_free "$KAFKA_CONTROLLER_PORT" "kafka controller, MORAINE_KAFKA_CONTROLLER_PORT"
    kafka_format
    # Only log lines written after this point count as "started".
    local log=$KAFKA_DIR/logs/server.log offset=0
    [[ -f $log ]] && offset=$(stat -c %s "$log")
    launch "$KAFKA_DIR" "$KAFKA_PIDFILE" "$KAFKA_DIR/logs/kafka.out" \
        java "-Xms$KAFKA_HEAP" "-Xmx$KAFKA_HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
        -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true ${KAFKA_JVM_OPTS[@]+"${KAFKA_JVM_OPTS[@]}"} \
        "-Dkafka.logs.dir=$KAFKA_DIR/logs" "-Dlog4j2.configurationFile=$KAFKA_DIR/log4j2.properties" \
        -cp "$KAFKA_LIBS/*" kafka.Kafka "$KAFKA_DIR/server.properties"
    kafka_wait_ready "$offset"
}

# Ready = the broker port accepts connections and the broker logged that it started (in KRaft that comes
# after it registered with the controller and was unfenced, so topics can be created right away).
kafka_wait_ready() {
    local offset=$1 log=$KAFKA_DIR/logs/server.log
    local deadline=$((SECONDS + KAFKA_READY_TIMEOUT_S)) pid=$LAUNCHED_PID
    while ((SECONDS < deadline)); do
        if ! still_running pid kafka_pid; then
            log_tail "$KAFKA_DIR/logs/kafka.out" 20
            log_tail "$log" 30
            die "kafka: broker exited during startup (logs: $KAFKA_DIR/logs)"
        fi
        # The log rolled over meanwhile: read the new file from its start.
        [[ -f $log ]] && (($(stat -c %s "$log") < offset)) && offset=0
        # grep -c, not -q: -q quits at the first match, tail then dies of SIGPIPE and pipefail fails the test.
        if tcp_open "$KAFKA_PORT" && [[ -f $log ]] &&
            tail -c +"$((offset + 1))" "$log" | grep -c 'Kafka Server started' >/dev/null; then
            say "kafka: started $KAFKA_VERSION (pid $pid, broker 127.0.0.1:$KAFKA_PORT, controller 127.0.0.1:$KAFKA_CONTROLLER_PORT)"
            return 0
        fi
        sleep 0.5
    done
    log_tail "$log" 30
    die "kafka: broker not ready on 127.0.0.1:$KAFKA_PORT within ${KAFKA_READY_TIMEOUT_S}s (pid $pid still running; logs: $KAFKA_DIR/logs)"
}

kafka_stop() { stop_service kafka kafka_pid "$KAFKA_PIDFILE"; }

kafka_status() {
    local pid
    if pid=$(kafka_pid); then
        if tcp_open "$KAFKA_PORT"; then
            say "kafka: running (pid $pid, broker 127.0.0.1:$KAFKA_PORT, controller 127.0.0.1:$KAFKA_CONTROLLER_PORT)"
            return 0
        fi
        say "kafka: running but not answering (pid $pid, broker 127.0.0.1:$KAFKA_PORT)"
        return 3
    fi
    say "kafka: stopped (broker port $KAFKA_PORT, controller port $KAFKA_CONTROLLER_PORT)"
    return 3
}

# Keeps libs/ (the Maven download); removes data, logs, configs and the cluster id.
kafka_reset() {
    kafka_stop
    rm -rf "$KAFKA_DIR"/{data,logs,cluster.id,server.properties,log4j2.properties,tools-log4j2.properties,kafka.pid}
    say "kafka: data removed ($KAFKA_DIR/data), jars kept"
}

# ---------------------------------------------------------------------------------------------------------
# Commands

print_env() {
    printf 'export MORAINE_CLICKHOUSE_ADDR=%q\n' "127.0.0.1:$CH_TCP_PORT"
    # ClickHouse runs on this host: lz4 on the wire would cost CPU on both ends to save loopback bandwidth.
    printf 'export MORAINE_CLICKHOUSE_COMPRESSION=none\n'
    printf 'export MORAINE_KAFKA_BROKERS=%q\n' "127.0.0.1:$KAFKA_PORT"
    printf 'export MORAINE_STATE_DIR=%q\n' "$STATE_DIR"
}

usage() {
    sed -n '5,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# services ARG: the services a command acts on, in start order.
services() {
    case ${1:-all} in
    all | both | "") echo clickhouse kafka ;;
    clickhouse | ch) echo clickhouse ;;
    kafka) echo kafka ;;
    *) die "unknown service '$1' (clickhouse, kafka)" ;;
    esac
}

# Reverse order for stop.
reversed() {
    local out=() s
    for s in "$@"; do out=("$s" "${out[@]}"); done
    echo "${out[@]}"
}

main() {
    local cmd=${1:-}
    (($#)) && shift
    check_settings
    case $cmd in
    env)
        resolve_state_dir
        print_env
        return 0
        ;;
    status)
        resolve_state_dir
        local list s rc=0
        list=$(services "${1:-}")
        for s in $list; do
            case $s in
            clickhouse) ch_status || rc=3 ;;
            kafka) kafka_status || rc=3 ;;
            esac
        done
        return "$rc"
        ;;
    kafka-run-class)
        (($#)) || die "usage: stack.sh kafka-run-class CLASS [ARGS...]"
        resolve_state_dir
        [[ -f $KAFKA_LIBS/.kafka-version ]] || die "kafka jars not installed: run 'stack.sh install kafka' first"
        [[ -f $KAFKA_DIR/tools-log4j2.properties ]] || { mkdir -p "$KAFKA_DIR" && render kafka-tools-log4j2.properties "$KAFKA_DIR/tools-log4j2.properties"; }
        kafka_java "$@"
        return
        ;;
    cluster)
        # shellcheck source=deploy/stack/cluster.sh
        source "$SCRIPT_DIR/cluster.sh"
        cluster_main "$@"
        return
        ;;
    install | start | stop | reset) ;;
    *) usage ;;
    esac
    (($# <= 1)) || usage

    resolve_state_dir
    take_lock
    local list s
    list=$(services "${1:-}")
    case $cmd in
    install)
        for s in $list; do
            case $s in
            clickhouse) ch_install ;;
            kafka) kafka_install ;;
            esac
        done
        ;;
    start)
        for s in $list; do
            case $s in
            clickhouse) ch_start ;;
            kafka) kafka_start ;;
            esac
        done
        ;;
    stop | reset)
        # shellcheck disable=SC2086 # $list is a space-separated word list
        for s in $(reversed $list); do
            case $s in
            clickhouse) "ch_$cmd" ;;
            kafka) "kafka_$cmd" ;;
            esac
        done
        ;;
    esac
}

main "$@"
