-- Lease tokens that only grow, and maintenance inside claims.

-- The fencing token of the current (or last) claim: it only grows (each claim takes a larger
-- one; release and retry_dead do not lower it, unlike `attempts`), so a stale holder's ack,
-- nack, release or heartbeat (e.g. one sent again after a reconnect) can never match a later
-- claim. Rows from versions without it read -1 (added without rewriting the table): their
-- first claim jumps past every attempt number, which is what those versions fenced with.
ALTER TABLE pgqueue.jobs ADD COLUMN IF NOT EXISTS lease_token bigint NOT NULL DEFAULT -1;
ALTER TABLE pgqueue.jobs ALTER COLUMN lease_token SET DEFAULT 0;

-- When maintenance (taking back expired leases) is next due. Claims run it when due, so
-- expired leases come back whatever API the fleet uses (worker, claim loops or plain SQL).
CREATE TABLE IF NOT EXISTS pgqueue.maintenance (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  janitor_due_at timestamptz NOT NULL DEFAULT now(),
  janitor_every interval NOT NULL DEFAULT interval '1 second' CHECK (janitor_every > interval '0')
);
INSERT INTO pgqueue.maintenance (singleton) VALUES (true) ON CONFLICT (singleton) DO NOTHING;

-- Lease operations take the claim's lease_token (bigint) where version 2 took the attempt
-- (int), and claims return it: the old signatures go (their grants are restored at the end).
DROP FUNCTION IF EXISTS pgqueue.claim_batch(text, text, int, interval);
DROP FUNCTION IF EXISTS pgqueue.claim_next(text, text, interval);
DROP FUNCTION IF EXISTS pgqueue.heartbeat(bigint, text, interval, int);
DROP FUNCTION IF EXISTS pgqueue.ack(bigint, text, int);
DROP FUNCTION IF EXISTS pgqueue.ack_batch(bigint[], text, int[]);
DROP FUNCTION IF EXISTS pgqueue.nack(bigint, text, text, interval, int);
DROP FUNCTION IF EXISTS pgqueue.release(bigint, text, int);
-- Jobs held right now keep working for their holders, which fence with the attempt.
UPDATE pgqueue.jobs SET lease_token = attempts WHERE state = 'claimed';
