-- 010_relay_password.sql - for docker/compose.yaml only: a password for the
-- role of sql/003_role.sql, so the relay container can log in over TCP. Use
-- a secret of your own anywhere but on your laptop.
ALTER ROLE outbox_relay PASSWORD 'outbox_relay';
