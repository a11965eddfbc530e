-- 006_inbox.sql - the consumer side's inbox: makes a handler's effect
-- happen once although Kafka may deliver a message more than once (the
-- relay's at-least-once resends after a crash, a consumer restarting from
-- its last committed offset, a rebalance).
--
-- Run it in the consumer's database (not the outbox's). A handler then
-- guards its effect in the same transaction:
--
--   BEGIN;
--   IF inbox_accept(id, topic, partition, offset) THEN   -- PL/pgSQL
--       ... the effect ...
--   END IF;
--   COMMIT;
--
-- The inbox row and the effect commit together or not at all, so a message
-- applied once is refused ever after, and one whose transaction rolled back
-- (crash, error) is accepted again. outbox-inbox (the consumer program)
-- calls inbox_accept() itself before the configured handler.
--
-- Concurrency: two transactions accepting the same id at once (a consumer
-- that lost its partitions still finishing a message the new owner reads
-- too) serialize on the primary key; the second waits for the first and
-- gets false if it committed, true if it rolled back.
--
-- Retention: a row is only needed while Kafka can still deliver its message
-- again, that is, for the topic's retention (retention.ms, 7 days by
-- default) plus the longest a consumer may lag behind. Delete older rows
-- regularly, in batches, e.g. from cron or pg_cron:
--
--   DELETE FROM inbox WHERE message_id IN (
--       SELECT message_id FROM inbox
--       WHERE received_at < now() - interval '8 days' LIMIT 10000);
--
-- (inbox_received_at_idx serves that query.) Partitioning by day makes
-- dropping old days cheaper, but a partitioned table's primary key must
-- include the partition key, so message_id alone would no longer be unique
-- across days: a redelivery that crosses midnight would be accepted twice.
-- Partition only by something the id determines (PARTITION BY HASH
-- (message_id)) if the table grows too large for one index, and keep the
-- DELETE above.
--
-- SPDX-License-Identifier: Apache-2.0

CREATE TABLE IF NOT EXISTS inbox (
    message_id      text        PRIMARY KEY,        -- the event's id header
    topic           text        NOT NULL,
    kafka_partition integer     NOT NULL,
    kafka_offset    bigint      NOT NULL,           -- of the first delivery applied
    received_at     timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS inbox_received_at_idx ON inbox (received_at);

-- true: the id is new, it is now recorded (in the caller's transaction) and
-- the caller applies its effect; false: it was applied before, skip it.
CREATE OR REPLACE FUNCTION inbox_accept(p_message_id text, p_topic text,
                                        p_partition integer, p_offset bigint)
RETURNS boolean
LANGUAGE sql
AS $$
    WITH ins AS (
        INSERT INTO inbox (message_id, topic, kafka_partition, kafka_offset)
        VALUES (p_message_id, p_topic, p_partition, p_offset)
        ON CONFLICT (message_id) DO NOTHING
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM ins)
$$;
