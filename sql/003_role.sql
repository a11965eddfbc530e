-- 003_role.sql - a least-privilege role for outbox-relay.
--
-- LOGIN REPLICATION is all the relay needs to stream: a logical replication
-- connection may create and use a slot with the REPLICATION attribute alone,
-- and pgoutput reads the outbox rows from the WAL with the publication's
-- rights, not the role's. So no SELECT on the outbox table is needed (with
-- the default snapshot.mode = never only new inserts are relayed), and no
-- write privilege at all: the relay never touches the table.
--
-- snapshot.mode = initial (the backfill of rows already in the table when
-- the slot is created) reads the table once, so it also needs
--     GRANT SELECT ON outbox TO outbox_relay;
--
-- Run as a superuser (or a role with CREATEROLE). Idempotent. Set a password
-- afterwards, e.g. \password outbox_relay in psql, or use another
-- authentication method.
--
-- pg_hba.conf: a logical replication connection names the database it
-- decodes, so its line matches the database name, not the keyword
-- "replication" (which only matches physical replication):
--     host  mydb  outbox_relay  10.0.0.0/24  scram-sha-256
--
-- SPDX-License-Identifier: Apache-2.0

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'outbox_relay') THEN
        CREATE ROLE outbox_relay LOGIN REPLICATION;
    ELSE
        ALTER ROLE outbox_relay LOGIN REPLICATION;
    END IF;
END
$$;

-- Only if the relay should create the publication itself instead of running
-- 002_publication.sql: CREATE on the database, and ownership of the outbox
-- table (CREATE PUBLICATION ... FOR TABLE needs it). Left out by default:
--     GRANT CREATE ON DATABASE mydb TO outbox_relay;
--     ALTER TABLE public.outbox OWNER TO outbox_relay;
