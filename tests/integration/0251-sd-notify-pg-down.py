#!/usr/bin/env python3
# 0251-sd-notify-pg-down - PostgreSQL away when the relay starts under
# systemd (Type=notify): the relay, whose configuration is good, says
# READY=1 with a STATUS= naming what it waits for, and /readyz says it is not
# ready, while it retries; once the server is there it streams.
#
# Before, READY=1 came only once streaming (or standing by): a relay that
# retried a server away kept the unit activating, so systemctl start waited,
# and at TimeoutStartSec (90 s by default) systemd stopped it and, with
# Restart=on-failure, started it over, for as long as the server was away.
# PgBouncer (Type=notify) is ready once it listens, whatever its servers; a
# Kafka Connect worker runs while its Debezium task retries or fails.
#
# Here the relay's postgres.conninfo names a port where nothing listens
# (RELAY_TEST_HTTP_PORT + 251), its HTTP endpoint RELAY_TEST_HTTP_PORT +
# 250. It must send READY=1 with STATUS=backing off: could not connect to
# PostgreSQL ..., /healthz 200 and /readyz 503 (state backoff). Then the
# test forwards that port to the environment's PostgreSQL: the relay sends
# READY=1 with STATUS=streaming, /readyz says 200, Kafka holds the events
# inserted, and SIGTERM ends it with exit 0. Registered only in builds with
# libsystemd.
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
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tap import bail, done, failed, tap  # noqa: E402

env = os.environ
for v in ("RELAY_BIN", "RELAY_SQL_DIR", "RELAY_TEST_PGHOST", "RELAY_TEST_PGPORT",
          "RELAY_TEST_PGUSER", "RELAY_TEST_KAFKA", "RELAY_TEST_HTTP_PORT"):
    if not env.get(v):
        bail(v + " is not set: run through meson test with the environment of tests/env/up")

tag = "sdpgdown_%d_%d" % (os.getpid(), int(time.time()))
db = slot = aggtype = tag
topic = "outbox.event." + aggtype
logdir = env.get("RELAY_TEST_LOGDIR") or tempfile.gettempdir()
http_port = int(env["RELAY_TEST_HTTP_PORT"]) + 250
pg_port = int(env["RELAY_TEST_HTTP_PORT"]) + 251


def psql(dbname, sql):
    return subprocess.run(
        ["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", env["RELAY_TEST_PGHOST"],
         "-p", env["RELAY_TEST_PGPORT"], "-U", env["RELAY_TEST_PGUSER"], "-d", dbname, "-c", sql],
        check=True, capture_output=True, text=True).stdout.strip()


def kafka_count():
    out = subprocess.run(["kcat", "-b", env["RELAY_TEST_KAFKA"], "-C", "-t", topic, "-o",
                          "beginning", "-e", "-q", "-f", "%k\n"],
                         capture_output=True, text=True, timeout=60)
    return len([l for l in out.stdout.splitlines() if l])


def kafka_wait(want):
    deadline = time.monotonic() + 120
    n = kafka_count()
    while n < want and time.monotonic() < deadline:
        time.sleep(1)
        n = kafka_count()
    return n


def http_get(path):
    """(status, body) of GET path on the relay's endpoint; (None, error) when none answered."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (http_port, path), timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return None, str(e)


class Forwarder:
    """Listens on 127.0.0.1:port and copies bytes both ways to the
    environment's PostgreSQL: the server the relay waited for appears."""

    def __init__(self, port):
        self.srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", port))
        self.srv.listen(8)
        self.closed = False
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while not self.closed:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            s = socket.create_connection((env["RELAY_TEST_PGHOST"], int(env["RELAY_TEST_PGPORT"])))
            for a, b in ((c, s), (s, c)):
                threading.Thread(target=self.pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def pipe(a, b):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        for x in (a, b):
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.closed = True
        self.srv.close()


def nothing_listens(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        return s.connect_ex(("127.0.0.1", port)) != 0
    finally:
        s.close()


def ready_with(status):
    return lambda ms: any("READY=1" in m.split("\n") and
                          any(l.startswith("STATUS=" + status) for l in m.split("\n"))
                          for m in ms)


if not nothing_listens(pg_port):
    bail("port %d (RELAY_TEST_HTTP_PORT + 251) is in use: it must be free for the server "
         "that is away" % pg_port)

sockdir = tempfile.mkdtemp(prefix="relay-notify-")
sockpath = os.path.join(sockdir, "notify.sock")
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sock.bind(sockpath)
messages = []
lock = threading.Lock()
stop_reading = False


def read():
    """Every datagram, all the time, as systemd reads them (see 0107)."""
    sock.settimeout(0.2)
    while not stop_reading:
        try:
            m = sock.recv(4096).decode()
        except socket.timeout:
            continue
        except OSError:
            return
        with lock:
            messages.append(m)


def wait_for(pred, seconds):
    deadline = time.monotonic() + seconds
    while True:
        with lock:
            if pred(list(messages)):
                return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def wait_http(path, code, seconds):
    deadline = time.monotonic() + seconds
    while True:
        st, body = http_get(path)
        if st == code or time.monotonic() >= deadline:
            return st, body
        time.sleep(0.2)


reader = threading.Thread(target=read, daemon=True)
reader.start()
log = os.path.join(logdir, "%s.log" % tag)
proc = None
fwd = None
try:
    psql("postgres", "CREATE DATABASE " + db)
    with open(os.path.join(env["RELAY_SQL_DIR"], "001_outbox.sql")) as f:
        psql(db, f.read())
    conninfo = "host=127.0.0.1 port=%d user=%s dbname=%s connect_timeout=10" % (
        pg_port, env["RELAY_TEST_PGUSER"], db)
    e = dict(os.environ, NOTIFY_SOCKET=sockpath)
    e.pop("WATCHDOG_USEC", None)
    e.pop("WATCHDOG_PID", None)
    with open(log, "w") as logf:
        proc = subprocess.Popen(
            [env["RELAY_BIN"], "--set", "postgres.conninfo=" + conninfo,
             "--set", "kafka.bootstrap.servers=" + env["RELAY_TEST_KAFKA"],
             "--set", "slot.name=" + slot, "--set", "http.listen=127.0.0.1:%d" % http_port],
            env=e, stdout=logf, stderr=subprocess.STDOUT)

    def logtail():
        with open(log) as f:
            return "".join(f.readlines()[-15:])

    tap(wait_for(ready_with("backing off: could not connect to PostgreSQL"), 60),
        "PostgreSQL away at start: READY=1 with STATUS=backing off: could not connect to "
        "PostgreSQL ...", "messages: %r\n%s" % (messages[-5:], logtail()))
    tap(proc.poll() is None, "the relay runs: it retries",
        "exit status %r\n%s" % (proc.poll(), logtail()))
    st, body = wait_http("/healthz", 200, 30)
    tap(st == 200, "/healthz: 200 (alive)", "%r %s" % (st, body))
    st, body = http_get("/readyz")
    tap(st == 503 and '"state":"backoff"' in body, "/readyz: 503, state backoff (not ready)",
        "%r %s" % (st, body))

    fwd = Forwarder(pg_port)
    with lock:
        k = len(messages)
    tap(wait_for(lambda ms: ready_with("streaming")(ms[k:]), 120),
        "the server there: READY=1 with STATUS=streaming",
        "messages since: %r\n%s" % (messages[k:], logtail()))
    st, body = wait_http("/readyz", 200, 30)
    tap(st == 200 and '"state":"streaming"' in body, "/readyz: 200, streaming",
        "%r %s" % (st, body))
    psql(db, "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
             "SELECT gen_random_uuid(), '%s', 'agg-' || g, 'NotifyEvent', "
             "jsonb_build_object('i', g) FROM generate_series(1, 20) g" % aggtype)
    n = kafka_wait(20)
    tap(n == 20, "Kafka holds the 20 events inserted, none twice", "Kafka holds %d" % n)
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
    tap(rc == 0, "SIGTERM: exit 0", "exit status %d\n%s" % (rc, logtail()))
finally:
    if proc and proc.poll() is None:
        proc.kill()
        proc.wait()
    if fwd:
        fwd.close()
    stop_reading = True
    reader.join()
    sock.close()
    os.unlink(sockpath)
    os.rmdir(sockdir)
    try:
        psql("postgres", "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                         "WHERE slot_name = '%s' AND NOT active" % slot)
        psql("postgres", "DROP DATABASE IF EXISTS %s WITH (FORCE)" % db)
    except subprocess.CalledProcessError as e:
        print("# cleanup: " + e.stderr.strip(), flush=True)

status = done()
if failed() == 0 and not env.get("RELAY_TEST_KEEP_RELAY_LOGS"):
    try:
        os.unlink(log)
    except OSError:
        pass
sys.exit(status)
