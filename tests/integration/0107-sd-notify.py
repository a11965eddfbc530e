#!/usr/bin/env python3
# 0107-sd-notify - what systemd hears from the relay (Type=notify, WatchdogSec),
# against the real PostgreSQL and Kafka of tests/env/up (TAP).
#
# Each relay gets its own NOTIFY_SOCKET, a datagram socket this test reads all
# the time, as systemd does: a socket left unread holds 10 datagrams
# (net.unix.max_dgram_qlen), then libsystemd's sendmsg() blocks the relay's
# loop, which never sees its SIGTERM (seen under load, when relay B took a
# while to start). Relay A (WATCHDOG_USEC set) must send READY=1 with
# STATUS=streaming, keep sending WATCHDOG=1, and relay its events (counted in
# Kafka). Relay B on the same slot (no WATCHDOG_USEC) must send READY=1 with a
# standing-by status and no WATCHDOG=1. SIGTERM to A: STOPPING=1, exit 0; B
# takes over (READY=1, streaming) and relays what was inserted meanwhile.
# B's walsender terminated: B backs off, and its STATUS= must say so (not
# keep "streaming"), then READY=1 streaming again and it relays what follows.
# SIGTERM to B: STOPPING=1, exit 0. Relay C backfills 3 000 rows (slowed to
# at least 12 s) before it streams: it must extend the start timeout
# (EXTEND_TIMEOUT_USEC) and say so in STATUS= meanwhile, then send READY=1;
# Kafka holds each row once. Relay D's backfill waits 20 s on the server's
# first FETCH (a filter that sleeps): WATCHDOG=1 and EXTEND_TIMEOUT_USEC=
# must go on meanwhile. Registered only in builds with libsystemd.
#
# SPDX-License-Identifier: Apache-2.0
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tap import bail, done, failed, tap  # noqa: E402

env = os.environ
for v in ("RELAY_BIN", "RELAY_SQL_DIR", "RELAY_TEST_PGHOST", "RELAY_TEST_PGPORT",
          "RELAY_TEST_PGUSER", "RELAY_TEST_KAFKA"):
    if not env.get(v):
        bail(v + " is not set: run through meson test with the environment of tests/env/up")

tag = "sdnotify_%d_%d" % (os.getpid(), int(time.time()))
db = slot = aggtype = tag
topic = "outbox.event." + aggtype
logdir = env.get("RELAY_TEST_LOGDIR") or tempfile.gettempdir()


def psql(dbname, sql):
    return subprocess.run(
        ["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", env["RELAY_TEST_PGHOST"],
         "-p", env["RELAY_TEST_PGPORT"], "-U", env["RELAY_TEST_PGUSER"], "-d", dbname, "-c", sql],
        check=True, capture_output=True, text=True).stdout.strip()


def kafka_count(t=topic):
    out = subprocess.run(["kcat", "-b", env["RELAY_TEST_KAFKA"], "-C", "-t", t, "-o", "beginning",
                          "-e", "-q", "-f", "%k\n"], capture_output=True, text=True, timeout=60)
    return len([l for l in out.stdout.splitlines() if l])


def kafka_wait(want, t=topic):
    """Kafka's count once it reaches want, or after 120 s."""
    deadline = time.monotonic() + 120
    n = kafka_count(t)
    while n < want and time.monotonic() < deadline:
        time.sleep(1)
        n = kafka_count(t)
    return n


def insert(first, count, dbname=db, agg=aggtype):
    psql(dbname, "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                 "SELECT gen_random_uuid(), '%s', 'agg-' || g, 'NotifyEvent', "
                 "jsonb_build_object('i', g) FROM generate_series(%d, %d) g"
                 % (agg, first, first + count - 1))


class Relay:
    def __init__(self, name, watchdog_usec, dbname=db, extra=()):
        self.name = name
        self.dir = tempfile.mkdtemp(prefix="relay-notify-")
        self.path = os.path.join(self.dir, "notify.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.messages = []
        self.lock = threading.RLock()  # pred() may call count()
        self.closed = False
        self.log = os.path.join(logdir, "%s.%s.log" % (tag, name))
        e = dict(os.environ, NOTIFY_SOCKET=self.path)
        e.pop("WATCHDOG_USEC", None)
        e.pop("WATCHDOG_PID", None)
        if watchdog_usec:
            e["WATCHDOG_USEC"] = str(watchdog_usec)
        conninfo = "host=%s port=%s user=%s dbname=%s" % (
            env["RELAY_TEST_PGHOST"], env["RELAY_TEST_PGPORT"], env["RELAY_TEST_PGUSER"], dbname)
        with open(self.log, "w") as logf:
            self.proc = subprocess.Popen(
                [env["RELAY_BIN"], "--set", "postgres.conninfo=" + conninfo,
                 "--set", "kafka.bootstrap.servers=" + env["RELAY_TEST_KAFKA"],
                 "--set", "slot.name=" + slot, "--set", "status.interval.ms=1000",
                 "--set", "http.listen=off"] + [a for x in extra for a in ("--set", x)],
                env=e, stdout=logf, stderr=subprocess.STDOUT)
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()

    def read(self):
        """The reader thread: every datagram into messages until close()."""
        self.sock.settimeout(0.2)
        while not self.closed:
            try:
                m = self.sock.recv(4096).decode()
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                self.messages.append(m)

    def wait_for(self, pred, seconds):
        """Wait until pred(messages) holds or seconds pass."""
        deadline = time.monotonic() + seconds
        while True:
            with self.lock:
                if pred(list(self.messages)):
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def count(self, needle):
        with self.lock:
            return sum(1 for m in self.messages if needle in m.split("\n"))

    def drain(self):
        """Let the reader take what the relay sent before it exited."""
        time.sleep(0.5)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def logtail(self):
        with open(self.log) as f:
            return "".join(f.readlines()[-15:])

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.closed = True
        self.reader.join()
        self.sock.close()
        os.unlink(self.path)
        os.rmdir(self.dir)


def ready_with(status):
    return lambda ms: any("READY=1" in m.split("\n") and ("STATUS=" + status) in m for m in ms)


def backfill_case(name, rows, watchdog_usec, extra):
    """A relay on a database of its own whose start backfills rows rows
    (slot.name + "_" + name: another database's slot). Checks that it gets
    to READY=1 streaming, that Kafka holds each row once and that it stops
    with 0; returns it and the messages it sent before READY=1."""
    dbname, agg = "%s_%s" % (db, name), "%s_%s" % (aggtype, name)
    psql("postgres", "CREATE DATABASE " + dbname)
    with open(os.path.join(env["RELAY_SQL_DIR"], "001_outbox.sql")) as f:
        psql(dbname, f.read())
    insert(1, rows, dbname, agg)
    r = Relay(name, watchdog_usec, dbname,
              ("snapshot.mode=initial", "slot.name=%s_%s" % (slot, name)) + extra)
    relays.append(r)
    up = r.wait_for(ready_with("streaming"), 180)
    tap(up, "relay %s backfills, then sends READY=1 with STATUS=streaming" % name.upper(),
        "messages: %r\n%s" % (r.messages[-5:], r.logtail()))
    with r.lock:
        before = r.messages[:next((i for i, m in enumerate(r.messages)
                                   if "READY=1" in m.split("\n")), len(r.messages))]
    n = kafka_wait(rows, "outbox.event." + agg)
    tap(n == rows, "Kafka holds the %d backfilled events, none twice" % rows, "Kafka holds %d" % n)
    rc = r.stop()
    tap(rc == 0, "relay %s exits 0 on SIGTERM" % name.upper(),
        "exit status %d\n%s" % (rc, r.logtail()))
    return r, before


relays = []
try:
    psql("postgres", "CREATE DATABASE " + db)
    with open(os.path.join(env["RELAY_SQL_DIR"], "001_outbox.sql")) as f:
        psql(db, f.read())

    a = Relay("a", 200000)  # 0.2 s: pings at least every 50 ms of loop turns
    relays.append(a)
    tap(a.wait_for(ready_with("streaming"), 120), "relay A sends READY=1 with STATUS=streaming",
        "messages: %r\n%s" % (a.messages, a.logtail()))
    insert(1, 100)
    tap(a.wait_for(lambda ms: a.count("WATCHDOG=1") >= 5, 60),
        "relay A keeps sending WATCHDOG=1 (%d so far)" % a.count("WATCHDOG=1"), a.logtail())

    b = Relay("b", 0)
    relays.append(b)
    tap(b.wait_for(ready_with("standing by"), 120),
        "relay B on the same slot sends READY=1 with a standing-by status",
        "messages: %r\n%s" % (b.messages, b.logtail()))

    n = kafka_wait(100)
    tap(n == 100, "Kafka holds the 100 events relay A relayed", "Kafka holds %d" % n)

    rc = a.stop()
    a.drain()
    tap(rc == 0, "relay A exits 0 on SIGTERM", "exit status %d\n%s" % (rc, a.logtail()))
    tap(a.count("STOPPING=1") >= 1, "relay A sends STOPPING=1", "messages: %r" % a.messages[-5:])

    insert(101, 50)
    tap(b.wait_for(ready_with("streaming"), 120), "relay B takes over and sends READY=1 streaming",
        "messages: %r\n%s" % (b.messages, b.logtail()))
    n = kafka_wait(150)
    tap(n == 150, "Kafka holds all 150 events after the takeover, none twice", "Kafka holds %d" % n)

    k = len(b.messages)
    psql("postgres", "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
                     "WHERE slot_name = '%s' AND active" % slot)
    tap(b.wait_for(lambda ms: any(l.startswith("STATUS=backing off: ")
                                  for m in ms[k:] for l in m.split("\n")), 60),
        "relay B's STATUS says it backs off once its stream broke",
        "messages since: %r\n%s" % (b.messages[k:], b.logtail()))
    k = len(b.messages)
    tap(b.wait_for(lambda ms: ready_with("streaming")(ms[k:]), 120),
        "relay B streams again and says so (READY=1, STATUS=streaming)",
        "messages since: %r\n%s" % (b.messages[k:], b.logtail()))
    insert(151, 10)
    n = kafka_wait(160)
    tap(n == 160, "Kafka holds all 160 events after B resumed, none twice", "Kafka holds %d" % n)
    rc = b.stop()
    b.drain()
    tap(rc == 0, "relay B exits 0 on SIGTERM", "exit status %d\n%s" % (rc, b.logtail()))
    tap(b.count("STOPPING=1") >= 1, "relay B sends STOPPING=1", "messages: %r" % b.messages[-5:])
    tap(b.count("WATCHDOG=1") == 0, "relay B, not asked for a watchdog, sends no WATCHDOG=1",
        "%d WATCHDOG=1 messages" % b.count("WATCHDOG=1"))

    # C: a backfill runs before READY=1, for as long as the table takes; the
    # unit's start timeout (TimeoutStartSec, 90 s by default) would end it,
    # and the next start would backfill again from the first row, for ever.
    # While it makes progress the relay extends the start timeout
    # (EXTEND_TIMEOUT_USEC). 3 000 rows at most 50 in flight, sent every
    # 200 ms (linger): at least 12 s of backfill.
    c, before = backfill_case("c", 3000, 0, ("kafka.linger.ms=200",
                                             "kafka.queue.buffering.max.messages=50"))
    ext = [l for m in before for l in m.split("\n") if l.startswith("EXTEND_TIMEOUT_USEC=")]
    tap(len(ext) >= 2 and all(int(l.split("=")[1]) >= 10000000 for l in ext),
        "relay C extends the start timeout while it backfills (%d EXTEND_TIMEOUT_USEC= of at "
        "least 10 s before READY=1)" % len(ext), "before READY=1: %r" % before)
    tap(any(l.startswith("STATUS=backfilling") for m in before for l in m.split("\n")),
        "relay C's STATUS says it backfills", "before READY=1: %r" % before)

    # D: the backfill's first FETCH sorts the whole table before it returns
    # a row (minutes for a large one; here a filter that sleeps 10 ms a row,
    # 2 000 rows: at least 20 s). A blocking FETCH stopped the loop: no
    # WATCHDOG=1 (WatchdogSec=30s killed the relay, and the next start
    # backfilled again), no extension. With a 2 s watchdog the relay must
    # ping all along (at most every 0.5 s) and keep extending.
    d, before = backfill_case("d", 2000, 2000000,
                              ("snapshot.filter=pg_sleep(0.01) IS NOT NULL",))
    pings = sum(1 for m in before if "WATCHDOG=1" in m.split("\n"))
    ext = sum(1 for m in before for l in m.split("\n") if l.startswith("EXTEND_TIMEOUT_USEC="))
    tap(pings >= 10 and ext >= 3,
        "relay D keeps feeding the watchdog and extending the start while the server sorts the "
        "table (%d WATCHDOG=1, %d EXTEND_TIMEOUT_USEC= before READY=1)" % (pings, ext),
        d.logtail())
finally:
    for r in relays:
        r.close()
    try:
        psql("postgres", "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                         "WHERE slot_name IN ('%s', '%s_c', '%s_d') AND NOT active"
                         % (slot, slot, slot))
        for suffix in ("", "_c", "_d"):
            psql("postgres", "DROP DATABASE IF EXISTS %s%s WITH (FORCE)" % (db, suffix))
    except subprocess.CalledProcessError as e:
        print("# cleanup: " + e.stderr.strip(), flush=True)

status = done()
if failed() == 0 and not env.get("RELAY_TEST_KEEP_RELAY_LOGS"):
    for r in relays:
        try:
            os.unlink(r.log)
        except OSError:
            pass
sys.exit(status)
