# lib.sh - helpers shared by tests/env/{up,down,install-deps,demo}, the
# generated Kafka control script and tests/run. Source it from bash; it sets
# no shell options of its own and starts nothing.
#
# Layout of one environment (the state directory, RELAY_TEST_ENV_DIR):
#   .outbox-relay-env   marker: down removes only directories that have it
#   env.sh              RELAY_TEST_* exports for tests and people
#   pg/data pg/sock     PostgreSQL 15 cluster (owned by the postgres user)
#   kafka/              server.properties, log4j2.properties, kafka.pid,
#                       ctl (start|stop|restart; RELAY_TEST_KAFKA_CMD), data/
#   logs/               postgresql.log, kafka.log, kafka.out, relay logs
#   cluster/            tests/env/cluster's 3-node Kafka, while a test runs it
#
# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034  # the variables are used by the scripts that source it

ENV_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$ENV_LIB_DIR/../.." && pwd)

# Debian packages the build, the tests, the demo and the benchmarks need.
ENV_DEB_PACKAGES=(
        build-essential gcc meson ninja-build pkg-config
        libpq-dev librdkafka-dev libjansson-dev
        postgresql-15 kcat maven openjdk-17-jdk-headless
        gnuplot-nox clang libclang-rt-14-dev valgrind
        procps psmisc iproute2 python3 util-linux coreutils
        libsystemd-dev systemd man-db bsdextrautils
)

env_log() {
        printf '%s: %s\n' "${ENV_PROG:-env}" "$*" >&2
}

env_die() {
        env_log "error: $*"
        exit 1
}

# env_config: derive every path and port from the RELAY_TEST_* variables.
env_config() {
        STATE_DIR=${RELAY_TEST_ENV_DIR:-${TMPDIR:-/tmp}/outbox-relay-env}
        case "$STATE_DIR" in
        /*) ;;
        *) STATE_DIR="$PWD/$STATE_DIR" ;;
        esac
        STATE_DIR=${STATE_DIR%/}
        case "$STATE_DIR" in
        "" | / | /tmp | /root | /home | /usr | /var | /etc)
                env_die "RELAY_TEST_ENV_DIR='$STATE_DIR' is not a private directory: use e.g. /tmp/outbox-relay-env" ;;
        esac
        PG_PORT=${RELAY_TEST_PGPORT:-54329}
        KAFKA_PORT=${RELAY_TEST_KAFKA_PORT:-19092}
        local p
        for p in "$PG_PORT" "$KAFKA_PORT"; do
                if ! [[ "$p" =~ ^[0-9]+$ ]] || ((p < 1 || p > 65534)); then
                        env_die "port '$p' is not a number between 1 and 65534: fix RELAY_TEST_PGPORT / RELAY_TEST_KAFKA_PORT"
                fi
        done
        CONTROLLER_PORT=$((KAFKA_PORT + 1))
        PG_BIN=${RELAY_TEST_PGBIN:-/usr/lib/postgresql/15/bin}
        WAL_SENDER_TIMEOUT=${RELAY_TEST_WAL_SENDER_TIMEOUT:-60s}
        KAFKA_HEAP=${RELAY_TEST_KAFKA_HEAP:-512m}

        ENV_MARKER="$STATE_DIR/.outbox-relay-env"
        ENV_FILE="$STATE_DIR/env.sh"
        LOG_DIR="$STATE_DIR/logs"
        PG_DIR="$STATE_DIR/pg"
        PG_DATA="$PG_DIR/data"
        PG_SOCK="$PG_DIR/sock"
        PG_LOG="$LOG_DIR/postgresql.log"
        KAFKA_DIR="$STATE_DIR/kafka"
        KAFKA_DATA="$KAFKA_DIR/data"
        KAFKA_PROPS="$KAFKA_DIR/server.properties"
        KAFKA_LOG4J="$KAFKA_DIR/log4j2.properties"
        KAFKA_PIDFILE="$KAFKA_DIR/kafka.pid"
        KAFKA_CTL="$KAFKA_DIR/ctl"
        KAFKA_OUT="$LOG_DIR/kafka.out"
        KAFKA_LIBS="$REPO_ROOT/tests/env/kafka/libs"
        KAFKA_POM="$REPO_ROOT/tests/env/kafka/pom.xml"
}

# --- processes ---------------------------------------------------------------

# pid_alive PID: the process exists and is not a zombie.
pid_alive() {
        local pid=$1 state
        [[ "$pid" =~ ^[0-9]+$ ]] || return 1
        kill -0 "$pid" 2>/dev/null || return 1
        state=$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null || true)
        [ "$state" != Z ]
}

# pid_is PID NEEDLE: the process's command line contains NEEDLE (guards
# against killing an unrelated process that reused a recorded pid).
pid_is() {
        local pid=$1 needle=$2
        [ -r "/proc/$pid/cmdline" ] || return 1
        tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$needle"
}

# wait_gone PID SECONDS: wait until PID is gone or a deadline passes.
wait_gone() {
        local pid=$1 deadline=$((SECONDS + $2))
        while pid_alive "$pid"; do
                ((SECONDS < deadline)) || return 1
                sleep 0.2
        done
        return 0
}

# port_in_use PORT: something listens on 127.0.0.1:PORT (or on any address).
port_in_use() {
        local port=$1
        if command -v ss >/dev/null 2>&1; then
                [ -n "$(ss -Hltn "sport = :$port" 2>/dev/null)" ]
        else
                (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null
        fi
}

# log_tail FILE [N]: show the end of a log, for a service that failed.
log_tail() {
        local file=$1 n=${2:-40}
        if [ -s "$file" ]; then
                printf -- '----- last %s lines of %s -----\n' "$n" "$file" >&2
                tail -n "$n" "$file" >&2
                printf -- '----- end of %s -----\n' "$file" >&2
        else
                printf -- '(%s is empty or missing)\n' "$file" >&2
        fi
}

# --- PostgreSQL -----------------------------------------------------------------

# pg_run CMD...: run as the postgres OS user when we are root (PostgreSQL
# refuses to run as root), as ourselves otherwise; from / so a private
# working directory does not trouble it.
pg_run() {
        if [ "$(id -u)" -eq 0 ]; then
                (cd / && runuser -u postgres -- "$@")
        else
                (cd / && "$@")
        fi
}

pg_postmaster_pid() {
        if [ -f "$PG_DATA/postmaster.pid" ]; then
                head -n 1 "$PG_DATA/postmaster.pid" 2>/dev/null || true
        fi
}

pg_is_running() {
        local pid
        pid=$(pg_postmaster_pid)
        [ -n "$pid" ] && pid_alive "$pid"
}

# pg_stop: fast shutdown, then immediate, then SIGKILL; fine when not running.
pg_stop() {
        local pid
        pid=$(pg_postmaster_pid)
        [ -n "$pid" ] || return 0
        if pid_alive "$pid"; then
                pg_run "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w -t 20 stop >/dev/null 2>&1 ||
                        pg_run "$PG_BIN/pg_ctl" -D "$PG_DATA" -m immediate -w -t 10 stop >/dev/null 2>&1 ||
                        true
                if pid_alive "$pid" && pid_is "$pid" "$PG_DATA"; then
                        env_log "postgres (pid $pid) did not stop: sending SIGKILL"
                        kill -KILL "$pid" 2>/dev/null || true
                        wait_gone "$pid" 5 || env_log "postgres (pid $pid) is still running"
                fi
        fi
        if pid_alive "$pid" && pid_is "$pid" "$PG_DATA"; then
                return 1
        fi
        return 0
}

# --- Kafka ------------------------------------------------------------------------

kafka_pid() {
        cat "$KAFKA_PIDFILE" 2>/dev/null || true
}

kafka_is_running() {
        local pid
        pid=$(kafka_pid)
        [ -n "$pid" ] && pid_alive "$pid" && pid_is "$pid" "$KAFKA_PROPS"
}

# kafka_jars: make sure tests/env/kafka/libs holds the jars of the pom,
# resolving them with Maven when missing or when the pom changed.
kafka_jars() {
        local stamp="$KAFKA_LIBS/.pom.sha256" want have=""
        want=$(sha256sum "$KAFKA_POM" | cut -d' ' -f1)
        [ -f "$stamp" ] && have=$(cat "$stamp")
        if [ "$want" = "$have" ] && compgen -G "$KAFKA_LIBS/kafka_2.13-*.jar" >/dev/null; then
                return 0
        fi
        command -v mvn >/dev/null 2>&1 || env_die "mvn not found: run tests/env/install-deps"
        env_log "resolving the Kafka jars with Maven into $KAFKA_LIBS"
        rm -rf "$KAFKA_LIBS"
        # outputDirectory must be absolute: Maven resolves it against the pom's directory.
        local mvn_log
        mvn_log=$(mktemp "${TMPDIR:-/tmp}/outbox-relay-mvn.XXXXXX")
        if ! mvn -B -q -f "$KAFKA_POM" dependency:copy-dependencies -DincludeScope=runtime \
                -DoutputDirectory="$KAFKA_LIBS" >"$mvn_log" 2>&1; then
                log_tail "$mvn_log" 30
                rm -f "$mvn_log"
                env_die "could not resolve the Kafka jars with Maven: check access to Maven Central and $KAFKA_POM"
        fi
        rm -f "$mvn_log"
        compgen -G "$KAFKA_LIBS/kafka_2.13-*.jar" >/dev/null ||
                env_die "Maven ran but $KAFKA_LIBS has no kafka_2.13 jar: check $KAFKA_POM"
        printf '%s\n' "$want" >"$stamp"
}

# kafka_launch: start the broker in a session of its own (it outlives the
# script that started it) and record its pid.
kafka_launch() {
        local pid
        setsid java "-Xms$KAFKA_HEAP" "-Xmx$KAFKA_HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
                -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent \
                -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
                "-Dlog4j2.configurationFile=$KAFKA_LOG4J" "-Dkafka.logs.dir=$LOG_DIR" \
                -cp "$KAFKA_LIBS/*" kafka.Kafka "$KAFKA_PROPS" \
                </dev/null >>"$KAFKA_OUT" 2>&1 &
        pid=$!
        printf '%s\n' "$pid" >"$KAFKA_PIDFILE"
}

# kafka_wait_ready [SECONDS]: until kcat sees one broker, failing early when
# the JVM exits. Prints the log tails on failure.
kafka_wait_ready() {
        local limit=${1:-90} deadline pid out
        deadline=$((SECONDS + limit))
        while :; do
                pid=$(kafka_pid)
                if ! pid_alive "$pid"; then
                        env_log "Kafka exited during startup (pid ${pid:-none})"
                        log_tail "$KAFKA_OUT" 30
                        log_tail "$LOG_DIR/kafka.log" 30
                        return 1
                fi
                if out=$(timeout 10 kcat -b "127.0.0.1:$KAFKA_PORT" -L -m 2 2>/dev/null) &&
                        grep -q ' 1 brokers:' <<<"$out"; then
                        return 0
                fi
                if ((SECONDS >= deadline)); then
                        env_log "Kafka did not answer on 127.0.0.1:$KAFKA_PORT within ${limit}s"
                        log_tail "$KAFKA_OUT" 30
                        log_tail "$LOG_DIR/kafka.log" 30
                        return 1
                fi
                sleep 0.5
        done
}

# kafka_stop: SIGTERM, wait up to 20 s, then SIGKILL; fine when not running.
kafka_stop() {
        local pid
        pid=$(kafka_pid)
        if [ -n "$pid" ] && pid_alive "$pid" && pid_is "$pid" "$KAFKA_PROPS"; then
                kill -TERM "$pid" 2>/dev/null || true
                # A broker frozen with SIGSTOP by a fault test must see the TERM.
                kill -CONT "$pid" 2>/dev/null || true
                if ! wait_gone "$pid" 20; then
                        env_log "Kafka (pid $pid) did not stop within 20 s: sending SIGKILL"
                        kill -KILL "$pid" 2>/dev/null || true
                        wait_gone "$pid" 5 || {
                                env_log "Kafka (pid $pid) is still running"
                                return 1
                        }
                fi
        fi
        rm -f "$KAFKA_PIDFILE"
        return 0
}

# --- the whole environment ---------------------------------------------------------

# env_is_up: the state directory is ours and one of its services runs.
env_is_up() {
        [ -f "$ENV_MARKER" ] || return 1
        pg_is_running || kafka_is_running
}

# env_teardown: stop both services and remove the state directory (only if
# it carries our marker). Copies the logs to RELAY_TEST_KEEP_LOGS first.
env_teardown() {
        local rc=0
        [ -e "$STATE_DIR" ] || return 0
        [ -f "$ENV_MARKER" ] ||
                env_die "$STATE_DIR has no $(basename "$ENV_MARKER") marker, so it is not a test environment: not touching it"
        if [ -n "${RELAY_TEST_KEEP_LOGS:-}" ] && [ -d "$LOG_DIR" ]; then
                if mkdir -p "$RELAY_TEST_KEEP_LOGS" && cp -r "$LOG_DIR/." "$RELAY_TEST_KEEP_LOGS/"; then
                        env_log "logs copied to $RELAY_TEST_KEEP_LOGS"
                else
                        env_log "could not copy the logs to $RELAY_TEST_KEEP_LOGS"
                fi
        fi
        # A 3-node cluster a fault test left behind (tests/env/cluster).
        if [ -e "$STATE_DIR/cluster" ]; then
                bash "$ENV_LIB_DIR/cluster" down || rc=1
        fi
        kafka_stop || rc=1
        pg_stop || rc=1
        if [ "$rc" -ne 0 ]; then
                env_log "a service did not stop: keeping $STATE_DIR; stop the process and run tests/env/down again"
                return 1
        fi
        rm -rf "$STATE_DIR"
}
