-- 001_outbox.sql - the transactional outbox table, Debezium-compatible.
--
-- The application inserts one row per event in the same transaction as its
-- business change; outbox-relay reads the INSERTs from the WAL (pgoutput) and
-- produces each one to Kafka. The column names and types are those of
-- Debezium's Outbox Event Router, so an application can switch between the
-- two without a migration. (tests/integration/harness.c creates the same
-- table for the tests: keep the two identical.)
--
-- SPDX-License-Identifier: Apache-2.0

CREATE TABLE outbox (
    -- The event id, unique per event: sent as the "id" header so consumers
    -- can drop the duplicates that at-least-once delivery allows.
    id uuid PRIMARY KEY,
    -- The kind of aggregate ("order", "customer"): picks the topic,
    -- outbox.event.<aggregatetype> by default.
    aggregatetype varchar(255) NOT NULL,
    -- The aggregate's id: the Kafka message key, so all events of one
    -- aggregate land in one partition, in commit order.
    aggregateid varchar(255) NOT NULL,
    -- The event type ("OrderPlaced"): sent as a header.
    type varchar(255) NOT NULL,
    -- The event body: the message value, the jsonb text as PostgreSQL prints
    -- it. NULL gives a message with a NULL value.
    payload jsonb,
    -- When the row was written: clock_timestamp(), not now(), so it is the
    -- insert's time rather than the transaction's start (for latency
    -- measurements and for finding old rows to delete).
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- No "sent_at" / "processed" column: the relay never writes to this table.
-- What has been relayed is tracked by the replication slot's confirmed LSN,
-- not by updating rows, so relaying costs no extra writes, no row locks and
-- no polling, and the table may be emptied at any time - even in the same
-- transaction as the insert (see 004_delete_in_same_tx.sql): the WAL keeps
-- the INSERT.
