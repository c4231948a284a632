-- The first pgqueue release: per-queue done counters and retry settings, the 'cancelled'
-- state, validated queue names, indexes in claim order, and the seed's functions whose
-- signatures gained arguments.

-- Completed jobs counted per queue, so pgqueue.depth never counts retained rows. Rows are
-- sharded by backend (slot) so concurrent ackers rarely wait on each other's counter row.
CREATE TABLE IF NOT EXISTS pgqueue.done_counts (
  queue text NOT NULL,
  slot int NOT NULL,
  n bigint NOT NULL,
  PRIMARY KEY (queue, slot)
);

-- Retry back-off per queue; the row with queue '' (not a valid queue name) is the default.
CREATE TABLE IF NOT EXISTS pgqueue.queue_settings (
  queue text PRIMARY KEY,
  retry_base interval NOT NULL CHECK (retry_base >= interval '0'),
  retry_max interval NOT NULL CHECK (retry_max >= retry_base)
);
INSERT INTO pgqueue.queue_settings VALUES ('', interval '1 second', interval '1 hour')
  ON CONFLICT (queue) DO NOTHING;

-- 'cancelled' joins the states; queue names are validated for new rows (old rows are kept
-- as they are, hence NOT VALID).
ALTER TABLE pgqueue.jobs DROP CONSTRAINT IF EXISTS jobs_state_check;
ALTER TABLE pgqueue.jobs ADD CONSTRAINT jobs_state_check
  CHECK (state IN ('ready', 'claimed', 'done', 'dead', 'cancelled'));
ALTER TABLE pgqueue.jobs ADD CONSTRAINT jobs_queue_name_check
  CHECK (octet_length(queue) BETWEEN 1 AND 255 AND queue !~ '[[:cntrl:]]') NOT VALID;
-- Free space on each page lets heartbeats and acks update in place (HOT).
ALTER TABLE pgqueue.jobs SET (fillfactor = 85);

-- The seed's indexes: the claim index ordered by created_at (equal within a batch), the lease
-- index that made every heartbeat an index write, and a full-table dashboard index.
DROP INDEX IF EXISTS pgqueue.jobs_claim_idx;
DROP INDEX IF EXISTS pgqueue.jobs_lease_idx;
DROP INDEX IF EXISTS pgqueue.jobs_state_idx;
-- Claim order: priority, then when the job became due, then id. run_after in the key lets
-- the scan skip jobs that are not yet due without visiting the heap.
CREATE INDEX IF NOT EXISTS jobs_ready_idx
  ON pgqueue.jobs (queue, priority DESC, run_after, id) WHERE state = 'ready';
CREATE INDEX IF NOT EXISTS jobs_claimed_idx ON pgqueue.jobs (queue) WHERE state = 'claimed';
CREATE INDEX IF NOT EXISTS jobs_stuck_idx
  ON pgqueue.jobs (queue, state) WHERE state IN ('dead', 'cancelled');
CREATE INDEX IF NOT EXISTS jobs_finished_idx
  ON pgqueue.jobs (state, finished_at) WHERE state IN ('done', 'dead', 'cancelled');
-- Kept from the seed: same (queue, key) is the same job.
CREATE UNIQUE INDEX IF NOT EXISTS jobs_idem_idx
  ON pgqueue.jobs (queue, idempotency_key) WHERE idempotency_key IS NOT NULL;

-- Completed jobs already retained (an upgraded seed) start the counters.
INSERT INTO pgqueue.done_counts (queue, slot, n)
  SELECT queue, 0, count(*) FROM pgqueue.jobs WHERE state = 'done' GROUP BY queue
  ON CONFLICT (queue, slot) DO UPDATE SET n = pgqueue.done_counts.n + EXCLUDED.n;

-- Seed signatures that gained arguments: dropped so the new ones do not overload them
-- ambiguously. Positional calls with the old arguments resolve to the new functions.
DROP FUNCTION IF EXISTS pgqueue.enqueue(text, jsonb, text, int, timestamptz);
DROP FUNCTION IF EXISTS pgqueue.heartbeat(bigint, text, interval);
DROP FUNCTION IF EXISTS pgqueue.ack(bigint, text);
DROP FUNCTION IF EXISTS pgqueue.nack(bigint, text, text, interval);
DROP FUNCTION IF EXISTS pgqueue.gc(interval, interval);

-- The seed fired its trigger once per row; the statement trigger that replaces it is created
-- with its function (sql/definitions/20_wakeups.sql).
DROP TRIGGER IF EXISTS jobs_notify_insert ON pgqueue.jobs;

-- Ready jobs with no attempts left (only the seed's janitor left such rows): normally empty, so
-- the janitor finds them without reading every ready job.
CREATE INDEX IF NOT EXISTS jobs_exhausted_idx
  ON pgqueue.jobs (id) WHERE state = 'ready' AND attempts >= max_attempts;
