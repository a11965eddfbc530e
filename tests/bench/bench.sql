-- bench.sql - schema and event generators for tests/bench (run by lib.sh
-- against the benchmark's own throwaway cluster; idempotent).
--
-- SPDX-License-Identifier: Apache-2.0

-- The outbox table of sql/001_outbox.sql.
CREATE TABLE IF NOT EXISTS public.outbox (
    id uuid PRIMARY KEY,
    aggregatetype varchar(255) NOT NULL,
    aggregateid varchar(255) NOT NULL,
    type varchar(255) NOT NULL,
    payload jsonb,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- One publication read by every side (relay, pg_recvlogical, Debezium),
-- each through a slot of its own; created before any slot.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'bench_pub') THEN
        CREATE PUBLICATION bench_pub FOR TABLE public.outbox WITH (publish = 'insert');
    END IF;
END $$;

-- The payload of one event: about 250 bytes of JSON. "t0" is
-- clock_timestamp() at the insert in epoch microseconds: the latency scenario
-- subtracts it from the message's LogAppendTime. (Built as text and cast:
-- nested jsonb_build_object calls cost twice as much.)
CREATE OR REPLACE FUNCTION bench_payload(seq bigint) RETURNS jsonb
LANGUAGE sql VOLATILE AS $$
    SELECT format('{"t0": %s, "seq": %s, "order": {"id": "ord-%s", "customer": "cust-%s", '
                  '"currency": "EUR", "total": %s.%s, "lines": [{"sku": "SKU-%s", "qty": %s, "price": 19.99}, '
                  '{"sku": "SKU-%s", "qty": 1, "price": 4.5}]}, "note": "outbox-relay bench"}',
                  (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, seq,
                  lpad(seq::text, 10, '0'), lpad((seq % 100000)::text, 6, '0'),
                  seq % 1000, lpad((seq % 100)::text, 2, '0'),
                  seq % 9973, 1 + seq % 5, seq % 7919)::jsonb
$$;

-- Insert the events first..last of tag (aggregatetype = tag picks the topic)
-- in the current transaction. benchtool load runs the same statement.
CREATE OR REPLACE PROCEDURE bench_insert(tag text, first bigint, last bigint)
LANGUAGE sql AS $$
    INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload)
    SELECT gen_random_uuid(), tag, 'order-' || g, 'OrderPlaced', bench_payload(g)
    FROM generate_series(first, last) g;
$$;

-- Write n events for tag with procedure proc (bench_insert or bench_emit),
-- per_tx events per transaction (per_tx <= 0: all in one transaction).
-- CALL it outside a transaction block.
CREATE OR REPLACE PROCEDURE bench_write_with(proc text, tag text, n bigint, per_tx bigint)
LANGUAGE plpgsql AS $$
DECLARE
    i bigint := 0;
    k bigint;
BEGIN
    IF per_tx <= 0 THEN
        per_tx := n;
    END IF;
    WHILE i < n LOOP
        k := least(per_tx, n - i);
        EXECUTE format('CALL %I($1, $2, $3)', proc) USING tag, i + 1, i + k;
        COMMIT;
        i := i + k;
    END LOOP;
END $$;

CREATE OR REPLACE PROCEDURE bench_write(tag text, n bigint, per_tx bigint)
LANGUAGE plpgsql AS $$ BEGIN CALL bench_write_with('bench_insert', tag, n, per_tx); END $$;

-- One event whose payload is about size_bytes of JSON (a single string).
CREATE OR REPLACE PROCEDURE bench_write_big(tag text, size_bytes int)
LANGUAGE sql AS $$
    INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload)
    VALUES (gen_random_uuid(), tag, 'big-1', 'BigEvent',
            jsonb_build_object('t0', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint,
                               'blob', repeat(md5(random()::text), size_bytes / 32)));
$$;

-- The same events as bench_write, written as transactional logical decoding
-- messages (outbox.source = messages, prefix 'outbox') instead of rows: the
-- body of README's "Logical decoding messages", built as text the way an
-- application would. No table is written.
CREATE OR REPLACE PROCEDURE bench_emit(tag text, first bigint, last bigint)
LANGUAGE sql AS $$
    SELECT pg_logical_emit_message(true, 'outbox',
               format('{"id": "%s", "aggregatetype": "%s", "aggregateid": "order-%s", '
                      '"type": "OrderPlaced", "payload": %s}',
                      gen_random_uuid(), tag, g, bench_payload(g)))
    FROM generate_series(first, last) g;
$$;

CREATE OR REPLACE PROCEDURE bench_write_msg(tag text, n bigint, per_tx bigint)
LANGUAGE plpgsql AS $$ BEGIN CALL bench_write_with('bench_emit', tag, n, per_tx); END $$;
