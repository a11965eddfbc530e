# lib.sh - shared functions of tests/bench/run and tests/bench/smoke (sourced).
#
# Every side reads the same publication (bench_pub) through a replication
# slot of its own, created before the events are written, and produces to
# topics of its own (relay.<tag>, dbz.<tag>), pre-created with
# message.timestamp.type=LogAppendTime so the broker's append time of the
# last message is the moment it was acknowledged.
#
# Needs: BENCH_DIR (this folder), BENCH_TMP (scratch dir), PGHOST/PGPORT,
# BENCH_KAFKA (host:port), RELAY_BIN; DBZ_CP for Debezium.
#
# SPDX-License-Identifier: Apache-2.0

BENCH_CLK_TCK=$(getconf CLK_TCK)
BENCH_PIDS=()   # readers started here and still to be stopped on exit
RELAY_ARGS=()   # more --set k=v for every relay started (e.g. a proxy's address)

bench_log() { printf '%s bench: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
bench_die() {
        bench_log "error: $*"
        exit 1
}

now_ms() { date +%s%3N; }

# psql on the benchmark database, unaligned, stop on the first error.
bq() { psql -X -q -At -v ON_ERROR_STOP=1 -h "$PGHOST" -p "$PGPORT" -U "${PGUSER:-postgres}" -d "${PGDATABASE:-postgres}" "$@"; }

bench_conninfo() { printf 'host=%s port=%s dbname=%s user=%s' "$PGHOST" "$PGPORT" "${PGDATABASE:-postgres}" "${PGUSER:-postgres}"; }

# Build benchtool (librdkafka + libpq) into $BENCH_TMP.
bench_build_tool() {
        BENCHTOOL=$BENCH_TMP/benchtool
        # shellcheck disable=SC2046
        cc -std=c11 -O2 -Wall $(pkg-config --cflags libpq rdkafka) "$BENCH_DIR/benchtool.c" \
                -o "$BENCHTOOL" $(pkg-config --libs libpq rdkafka) -lm ||
                bench_die "could not build tests/bench/benchtool.c (needs libpq-dev, librdkafka-dev, pkg-config)"
}

bench_setup_db() { bq -f "$BENCH_DIR/bench.sql" >/dev/null 2>&1 || bq -f "$BENCH_DIR/bench.sql"; }

bench_topics() { "$BENCHTOOL" topics "$BENCH_KAFKA" 16777216 "$@" || bench_die "could not create topics $*"; }

slot_create() { bq -c "SELECT pg_create_logical_replication_slot('$1', 'pgoutput')" >/dev/null; }
slot_drop() {
        local i
        for i in 1 2 3 4 5 6 7 8 9 10; do
                bq -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '$1'" \
                        >/dev/null 2>&1 && return 0
                sleep 1 # still active: its walsender is going away
        done
        bench_log "warning: could not drop slot $1"
}
wal_lsn() { bq -c "SELECT pg_current_wal_lsn()"; }

# write TAG N PER_TX: N events in transactions of PER_TX rows (0: one).
# synchronous_commit=off only speeds the writer up; the WAL is the same.
bench_write() {
        bq -c "SET synchronous_commit = off" -c "CALL bench_write('$1', $2, $3)"
}

# /proc figures of a live process.
proc_cpu_s() { awk -v t="$BENCH_CLK_TCK" '{ sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / t }' "/proc/$1/stat" 2>/dev/null || echo NA; }
proc_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null || echo NA; }

# Stop a reader: SIGTERM, up to $2 s (30) for a clean exit, then SIGKILL.
# Sets STOP_RC to its exit status.
reader_stop() {
        local pid=$1 limit=${2:-30} i=0
        STOP_RC=0
        if kill -0 "$pid" 2>/dev/null; then
                kill -TERM "$pid" 2>/dev/null || true
                while kill -0 "$pid" 2>/dev/null && [ "$i" -lt $((limit * 10)) ]; do
                        sleep 0.1
                        i=$((i + 1))
                done
                if kill -0 "$pid" 2>/dev/null; then
                        bench_log "warning: pid $pid ignored SIGTERM for ${limit}s: SIGKILL"
                        kill -KILL "$pid" 2>/dev/null || true
                fi
        fi
        wait "$pid" 2>/dev/null || STOP_RC=$?
        local keep=() p
        for p in "${BENCH_PIDS[@]}"; do [ "$p" = "$pid" ] || keep+=("$p"); done
        BENCH_PIDS=("${keep[@]}")
}

bench_stop_all() {
        local p
        for p in "${BENCH_PIDS[@]}"; do
                reader_stop "$p" 10 || true
        done
}

# relay_start SLOT LOG [--set k=v]...: start the relay in the background,
# with the benchmark's common producer settings (acks=all, linger 5 ms, no
# compression), or with the relay's own defaults when BENCH_RELAY_DEFAULTS=1.
# No HTTP endpoint (a later --set may ask for one): it is not measured, and
# its default port may be taken by another relay on the machine, which
# stopped the smoke's mock step once.
# Sets READER_PID and READER_T0 (epoch ms just before the exec).
relay_start() {
        local slot=$1 log=$2 common=()
        shift 2
        [ "${BENCH_RELAY_DEFAULTS:-0}" = 1 ] ||
                common=(--set kafka.acks=all --set kafka.enable.idempotence=true
                        --set kafka.linger.ms=5 --set kafka.compression.type=none)
        READER_T0=$(now_ms)
        # shellcheck disable=SC2016 # ${aggregatetype} is the relay's template syntax
        "$RELAY_BIN" --set postgres.conninfo="$(bench_conninfo)" \
                --set kafka.bootstrap.servers="$BENCH_KAFKA" \
                --set slot.name="$slot" --set publication.name=bench_pub \
                --set 'topic.template=relay.${aggregatetype}' --set http.listen=off \
                "${common[@]}" "${RELAY_ARGS[@]}" "$@" >"$log" 2>&1 &
        READER_PID=$!
        BENCH_PIDS+=("$READER_PID")
}

# Epoch ms of the relay's "streaming from replication slot" line, or empty.
relay_streaming_ms() {
        local line
        line=$(grep -m1 'streaming from replication slot' "$1" 2>/dev/null | cut -c1-23) || true
        [ -n "$line" ] || return 0
        date -u -d "$line" +%s%3N
}

# dbz_start SLOT LOG POLL_INTERVAL_MS [extra properties line]...
# The producer gets librdkafka's default batch.size (1000000) too: with the
# Java client's 16 kB default, a 1 000-record batch of ~300-byte events goes
# out in some twenty produce requests, at most five in flight, and Debezium
# spends most of its time waiting for acks (measured here: ack waits 12.5 s
# of 34 s for 30 000 events, against 1.5 s of 15 s with 1 MB batches).
dbz_start() {
        local slot=$1 log=$2 poll=$3 props
        shift 3
        props=$BENCH_TMP/dbz-$slot.properties
        cat >"$props" <<EOF
engine.name=bench-$slot
engine.connector.class=io.debezium.connector.postgresql.PostgresConnector
engine.plugin.name=pgoutput
engine.slot.name=$slot
engine.slot.drop.on.stop=false
engine.publication.name=bench_pub
engine.publication.autocreate.mode=disabled
engine.database.hostname=$PGHOST
engine.database.port=$PGPORT
engine.database.user=${PGUSER:-postgres}
engine.database.password=
engine.database.dbname=${PGDATABASE:-postgres}
engine.topic.prefix=bench
engine.table.include.list=public.outbox
engine.snapshot.mode=no_data
engine.tombstones.on.delete=false
engine.poll.interval.ms=$poll
engine.offset.storage=org.apache.kafka.connect.storage.MemoryOffsetBackingStore
engine.offset.flush.interval.ms=0
engine.transforms=outbox
engine.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
engine.transforms.outbox.route.topic.replacement=dbz.\${routedByValue}
producer.bootstrap.servers=$BENCH_KAFKA
producer.acks=all
producer.enable.idempotence=true
producer.linger.ms=5
producer.compression.type=none
producer.batch.size=1000000
producer.max.request.size=16777216
EOF
        local extra
        for extra in "$@"; do printf '%s\n' "$extra" >>"$props"; done
        READER_T0=$(now_ms)
        # shellcheck disable=SC2086 # JVM options: split on purpose
        java ${BENCH_DBZ_JAVA_OPTS:-} -cp "$DBZ_CP" dev.outboxrelay.bench.OutboxBench "$props" >"$log" 2>"$log.err" &
        READER_PID=$!
        BENCH_PIDS+=("$READER_PID")
}

dbz_streaming_ms() { awk '$1 == "BENCH" && $2 == "streaming" { print $3; exit }' "$1" 2>/dev/null || true; }

# wait_streaming KIND LOG PID TIMEOUT_S: echo the epoch ms streaming began.
wait_streaming() {
        local kind=$1 log=$2 pid=$3 deadline=$((SECONDS + $4)) ms=""
        while [ "$SECONDS" -lt "$deadline" ]; do
                ms=$("${kind}_streaming_ms" "$log")
                [ -z "$ms" ] || {
                        echo "$ms"
                        return 0
                }
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.01
        done
        bench_log "$kind (pid $pid) did not start streaming within $4 s; its log:"
        tail -n 20 "$log" >&2 || true
        [ ! -f "$log.err" ] || grep -E 'ERROR|Exception|BENCH' "$log.err" | tail -n 20 >&2 || true
        return 1
}

# LogAppendTime (epoch ms) of the message at OFFSET of TOPIC (partition 0).
msg_time_ms() {
        timeout 30 kcat -C -b "$BENCH_KAFKA" -t "$1" -p 0 -o "$2" -c 1 -e -q -f '%T\n' 2>/dev/null | head -n 1
}

# recvlogical SLOT ENDPOS TIMEOUT_S: read the slot's WAL into /dev/null;
# echo "<elapsed ms>"; non-zero when it failed or hit the deadline.
recvlogical() {
        local t0 rc=0
        t0=$(now_ms)
        timeout "$3" pg_recvlogical -h "$PGHOST" -p "$PGPORT" -U "${PGUSER:-postgres}" -d "${PGDATABASE:-postgres}" \
                --slot="$1" --start -o proto_version=1 -o publication_names=bench_pub \
                --endpos="$2" --no-loop -f /dev/null || rc=$?
        echo $(($(now_ms) - t0))
        return "$rc"
}

# catchup_reader KIND SLOT TOPIC N TIMEOUT_S LOG [ARG...]: start a reader on
# a slot whose WAL already holds N events, wait for the N-th message, stop it.
# ARGs go to relay_start (--set k=v ...) or dbz_start (POLL_MS [property]...).
# With CU_SEEN_TIME=1 (a topic of several partitions, or the mock cluster)
# the end is when benchtool wait saw the N-th message instead.
# Sets CU_MS (start to the last LogAppendTime), CU_STEADY_MS (first to last
# message as benchtool wait saw them, polling every millisecond), CU_STREAM_MS (start to
# streaming), CU_CPU (utime+stime s), CU_HWM (VmHWM kB), CU_RC, CU_COUNT.
catchup_reader() {
        local kind=$1 slot=$2 topic=$3 n=$4 limit=$5 log=$6 res off seen last smsg
        case $kind in
        relay) relay_start "$slot" "$log" "${@:7}" ;;
        dbz) dbz_start "$slot" "$log" "${7:-500}" "${@:8}" ;;
        esac
        CU_RC=0
        res=$("$BENCHTOOL" wait "$BENCH_KAFKA" "$topic" "$n" "$limit" "$READER_PID") || CU_RC=$?
        read -r off seen first <<<"$res"
        CU_COUNT=${off:-0}
        CU_CPU=$(proc_cpu_s "$READER_PID")
        CU_HWM=$(proc_kb "$READER_PID" VmHWM)
        reader_stop "$READER_PID" 30
        [ "$CU_RC" -eq 0 ] || {
                bench_log "$kind on $slot delivered ${CU_COUNT} of $n events (wait rc $CU_RC); log: $log"
                tail -n 5 "$log" >&2 || true
                CU_MS=NA CU_STREAM_MS=NA
                return 1
        }
        last=
        [ "${CU_SEEN_TIME:-0}" = 1 ] || last=$(msg_time_ms "$topic" $((n - 1)))
        [ -n "$last" ] || last=$seen
        CU_MS=$((last - READER_T0))
        # From the first message in Kafka to the last, when wait saw both
        # (leaves out the start: connections, metadata, the topic's limit).
        CU_STEADY_MS=NA
        if [ "${first:-0}" -gt 0 ] && [ "${seen:-0}" -gt "${first:-0}" ]; then CU_STEADY_MS=$((seen - first)); fi
        smsg=$("${kind}_streaming_ms" "$log")
        if [ -n "$smsg" ]; then CU_STREAM_MS=$((smsg - READER_T0)); else CU_STREAM_MS=NA; fi
        return 0
}

# rate N MS: events per second, integer.
rate() { awk -v n="$1" -v ms="$2" 'BEGIN { if (ms == "NA" || ms <= 0) print "NA"; else printf "%.0f", n * 1000 / ms }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "NA" || b == "NA" || b + 0 == 0) print "NA"; else printf "%.2f", a / b }'; }
per_million() { awk -v c="$1" -v n="$2" 'BEGIN { if (c == "NA" || n + 0 == 0) print "NA"; else printf "%.2f", c * 1000000 / n }'; }

# --- a broker at a distance: Toxiproxy in front of the broker's FAR listener ---
# (tests/env/up RELAY_TEST_KAFKA_FAR_PORT, tests/env/cluster
# RELAY_TEST_CLUSTER_FAR_PORT): the broker advertises the proxy's port, so a
# client that bootstraps through the proxy stays behind it. Toxiproxy's
# latency toxic holds every chunk of data for its latency from the moment it
# was read (a delay line, not a rate limit): half the round trip on the
# requests (upstream), the rest on the responses (downstream), so the
# broker's LogAppendTime sees the one-way delay a far broker would.

# toxi_install DIR: echo a Toxiproxy server binary: $TOXIPROXY_BIN, or
# DIR/toxiproxy-server, built with "go install" (Go 1.17 or later; Debian
# 12's golang-go is 1.19) when missing.
toxi_install() {
        local dir=$1 go
        if [ -n "${TOXIPROXY_BIN:-}" ]; then
                [ -x "$TOXIPROXY_BIN" ] || bench_die "TOXIPROXY_BIN=$TOXIPROXY_BIN is not executable"
                echo "$TOXIPROXY_BIN"
                return 0
        fi
        if [ ! -x "$dir/toxiproxy-server" ]; then
                go=$(command -v go || true)
                [ -n "$go" ] || [ ! -x /usr/local/go/bin/go ] || go=/usr/local/go/bin/go
                [ -n "$go" ] || bench_die "no go command to build Toxiproxy: apt-get install golang-go (or set TOXIPROXY_BIN)"
                bench_log "building Toxiproxy v2.5.0 into $dir (go install)"
                mkdir -p "$dir"
                GOBIN=$dir "$go" install github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0 >&2 ||
                        bench_die "could not build Toxiproxy (go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0)"
                mv "$dir/server" "$dir/toxiproxy-server"
        fi
        echo "$dir/toxiproxy-server"
}

# toxi_start BIN API_PORT LOG: start the server (loopback only), wait for its API.
toxi_start() {
        local i
        "$1" -host 127.0.0.1 -port "$2" >"$3" 2>&1 &
        TOXI_PID=$!
        BENCH_PIDS+=("$TOXI_PID")
        TOXI_API=127.0.0.1:$2
        for i in $(seq 50); do
                curl -fs "$TOXI_API/version" >/dev/null 2>&1 && return 0
                sleep 0.1
        done
        bench_die "Toxiproxy did not answer on $TOXI_API (log: $3)"
}

# toxi_proxy NAME LISTEN_PORT UPSTREAM_PORT: a proxy with two latency toxics at 0.
toxi_proxy() {
        curl -fs -XPOST "$TOXI_API/proxies" \
                -d "{\"name\":\"$1\",\"listen\":\"127.0.0.1:$2\",\"upstream\":\"127.0.0.1:$3\"}" >/dev/null &&
                curl -fs -XPOST "$TOXI_API/proxies/$1/toxics" \
                        -d '{"name":"up","type":"latency","stream":"upstream","attributes":{"latency":0}}' >/dev/null &&
                curl -fs -XPOST "$TOXI_API/proxies/$1/toxics" \
                        -d '{"name":"down","type":"latency","stream":"downstream","attributes":{"latency":0}}' >/dev/null ||
                bench_die "could not create the Toxiproxy proxy $1 (127.0.0.1:$2 -> $3)"
        TOXI_PROXIES+=("$1")
}
TOXI_PROXIES=()

# toxi_rtt MS: add MS of round trip on every proxy (whole milliseconds:
# floor(MS/2) on the requests, the rest on the responses).
toxi_rtt() {
        local p up=$(($1 / 2)) down=$(($1 - $1 / 2))
        for p in "${TOXI_PROXIES[@]}"; do
                curl -fs -XPOST "$TOXI_API/proxies/$p/toxics/up" -d "{\"attributes\":{\"latency\":$up}}" >/dev/null &&
                        curl -fs -XPOST "$TOXI_API/proxies/$p/toxics/down" -d "{\"attributes\":{\"latency\":$down}}" >/dev/null ||
                        bench_die "could not set the latency of proxy $p"
        done
}

# stats_summary LOG: from the librdkafka statistics a relay logged
# (kafka.statistics.interval.ms with log.level=debug), while it was busy:
# "<messages per produce request> <bytes per request> <broker rtt avg ms>",
# averaged over the intervals that sent something; NA when there are none.
stats_summary() {
        python3 - "$1" <<'PY'
import json, sys
msgs, byts, rtts = [], [], []
for line in open(sys.argv[1], errors="replace"):
    if "librdkafka statistics: " not in line:
        continue
    try:
        d = json.loads(line.split("librdkafka statistics: ", 1)[1])
    except ValueError:
        continue
    for t in d.get("topics", {}).values():
        if t["batchcnt"]["cnt"] > 0:
            msgs.append(t["batchcnt"]["avg"])
            byts.append(t["batchsize"]["avg"])
    r = [b["rtt"]["avg"] / 1000.0 for b in d.get("brokers", {}).values()
         if b.get("nodeid", -1) >= 0 and b["rtt"]["cnt"] > 0]
    if r:
        rtts.append(sum(r) / len(r))
avg = lambda v: sum(v) / len(v)
print("%.0f %.0f %.1f" % (avg(msgs), avg(byts), avg(rtts)) if msgs and rtts else "NA NA NA")
PY
}
