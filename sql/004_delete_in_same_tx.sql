-- 004_delete_in_same_tx.sql - the "delete in the same transaction" pattern.
--
-- The event is inserted and deleted in the transaction of the business
-- change. The WAL keeps the INSERT, which outbox-relay decodes and relays
-- after the COMMIT; the DELETE is not published (002_publication.sql), and
-- the table stays empty: no cleanup job, no bloat, no index growth.
-- (Debezium's documentation recommends the same.) If the transaction rolls
-- back, neither the business change nor the event exists.
--
-- Runs as is on a database with 001_outbox.sql applied; "orders" stands in
-- for the application's own tables. In an application the event id comes
-- from the code (a UUID), so the DELETE can name it.
--
-- SPDX-License-Identifier: Apache-2.0

CREATE TABLE IF NOT EXISTS orders (
    id bigint PRIMARY KEY,
    status text NOT NULL
);

BEGIN;

-- The business change.
INSERT INTO orders (id, status) VALUES (1001, 'placed')
    ON CONFLICT (id) DO UPDATE SET status = excluded.status;

-- The event, in the same transaction.
INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload)
VALUES ('7d4d2c4e-9a4f-4a8e-b1f0-3c2e6f1a0b01', 'order', '1001', 'OrderPlaced',
        '{"orderId": 1001, "status": "placed"}');

-- Gone from the table before anyone could see it; still in the WAL.
DELETE FROM outbox WHERE id = '7d4d2c4e-9a4f-4a8e-b1f0-3c2e6f1a0b01';

COMMIT;
