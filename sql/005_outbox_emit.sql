-- 005_outbox_emit.sql - outbox_emit(): write one event from the application's
-- transaction, to the outbox table or as a logical decoding message.
--
--   SELECT outbox_emit('order', '42', 'OrderPlaced', '{"total": 99.5}');
--   SELECT outbox_emit('order', '42', 'OrderPlaced', '{"total": 99.5}',
--                      '{"traceparent": "00-4bf9-01"}');   -- headers: message mode only
--
-- It returns the event id (a new uuid). Which way it writes is a setting, so
-- the application's SQL does not change when the outbox moves from the table
-- to messages (set it per database, per role or per session):
--
--   outbox.emit = 'table'    (default) INSERT INTO outbox (001_outbox.sql):
--                            the relay reads it with outbox.source = table
--                            or both
--   outbox.emit = 'message'  pg_logical_emit_message(true, <prefix>, <body>):
--                            no table, no vacuum; the relay reads it with
--                            outbox.source = messages or both
--   outbox.message_prefix    the prefix (default 'outbox'): the relay's
--                            outbox.message.prefix must be the same
--
--   ALTER DATABASE app SET outbox.emit = 'message';
--
-- The message is transactional: it is decoded only if the transaction
-- commits, at its place among the transaction's changes, exactly like the
-- INSERT. Its body is the JSON object the relay expects (README, "Logical
-- decoding messages"):
--
--   {"id": "<uuid>", "aggregatetype": "...", "aggregateid": "...",
--    "type": "...", "payload": <the jsonb>, "headers": {...}}
--
-- In table mode a headers argument is refused rather than dropped: the table
-- has no headers column (add one column per header and list them in the
-- relay's outbox.headers).
--
-- SPDX-License-Identifier: Apache-2.0

CREATE OR REPLACE FUNCTION outbox_emit(aggregatetype text, aggregateid text, type text,
                                       payload jsonb, headers jsonb DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    event_id uuid := gen_random_uuid();
    mode text := coalesce(nullif(current_setting('outbox.emit', true), ''), 'table');
    prefix text := coalesce(nullif(current_setting('outbox.message_prefix', true), ''), 'outbox');
    body jsonb;
BEGIN
    IF mode = 'message' THEN
        IF headers IS NOT NULL AND jsonb_typeof(headers) <> 'object' THEN
            RAISE EXCEPTION 'outbox_emit: headers must be a JSON object, not %', jsonb_typeof(headers)
                USING HINT = 'pass e.g. ''{"traceparent": "..."}''';
        END IF;
        body := jsonb_build_object('id', event_id, 'aggregatetype', aggregatetype,
                                   'aggregateid', aggregateid, 'type', type, 'payload', payload);
        IF headers IS NOT NULL THEN
            body := body || jsonb_build_object('headers', headers);
        END IF;
        PERFORM pg_logical_emit_message(true, prefix, body::text);
    ELSIF mode = 'table' THEN
        IF headers IS NOT NULL THEN
            RAISE EXCEPTION 'outbox_emit: headers need outbox.emit = ''message''; the outbox table has no headers column'
                USING HINT = 'add one column per header to the outbox table and list them in the relay''s outbox.headers, or set outbox.emit = ''message''';
        END IF;
        INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload)
        VALUES (event_id, outbox_emit.aggregatetype, outbox_emit.aggregateid, outbox_emit.type,
                outbox_emit.payload);
    ELSE
        RAISE EXCEPTION 'outbox_emit: outbox.emit is ''%'', not ''table'' or ''message''', mode;
    END IF;
    RETURN event_id;
END
$$;
