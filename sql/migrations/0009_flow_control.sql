-- Flow control: fleet-wide limits per queue and jobs that wait for other jobs.

-- Per-queue limits (pgqueue.set_queue_limits): at most max_claimed jobs of the queue claimed at
-- once across every session, and at most rate jobs started per rate_period (a token bucket of
-- `burst` tokens, refilled continuously). One row per limited queue; most databases have none,
-- and an unlimited queue's claim then costs one probe of an empty index. Claims of a limited
-- queue lock its row, so they take turns: the row is the fleet's counter.
CREATE TABLE IF NOT EXISTS pgqueue.queue_limits (
  queue text PRIMARY KEY,
  max_claimed int CHECK (max_claimed >= 1),
  rate int CHECK (rate >= 1),
  rate_period interval CHECK (rate_period > interval '0'),
  burst int CHECK (burst >= 1),
  tokens float8 NOT NULL DEFAULT 0,         -- tokens left at refilled_at
  refilled_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((rate IS NULL) = (rate_period IS NULL) AND (rate IS NULL) = (burst IS NULL)),
  CHECK (max_claimed IS NOT NULL OR rate IS NOT NULL)
);

-- When limits last changed: set_queue_limits writes this row, and a claim in a REPEATABLE READ
-- or SERIALIZABLE transaction locks it, so one whose snapshot predates a change (a limit it
-- cannot see) fails with 40001 rather than claiming past it.
CREATE TABLE IF NOT EXISTS pgqueue.queue_limits_changed (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  changed_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO pgqueue.queue_limits_changed DEFAULT VALUES ON CONFLICT DO NOTHING;

-- Dependencies: a job enqueued with depends_on waits ('waiting') until every job it depends on
-- is done, then becomes ready (sql/definitions/77_dependencies.sql has the rules). One row per
-- edge still to be satisfied: an ack deletes its job's edges; a job that ends dead or cancelled
-- keeps its own (retry_dead reads them), and gc deletes them with it. No foreign keys: gc
-- deletes millions of jobs, and per-row RI triggers would slow it.
ALTER TABLE pgqueue.jobs DROP CONSTRAINT IF EXISTS jobs_state_check;
ALTER TABLE pgqueue.jobs ADD CONSTRAINT jobs_state_check
  CHECK (state IN ('ready', 'claimed', 'done', 'dead', 'cancelled', 'waiting'));
CREATE TABLE IF NOT EXISTS pgqueue.job_dependencies (
  job_id bigint NOT NULL,      -- the waiting job
  depends_on bigint NOT NULL,  -- a job it waits for
  PRIMARY KEY (depends_on, job_id)
);
CREATE INDEX IF NOT EXISTS job_dependencies_job_idx ON pgqueue.job_dependencies (job_id);
-- Waiting jobs in id order (the janitor's safety net walks them in slices), with their queue
-- for queue_summary's counts.
CREATE INDEX IF NOT EXISTS jobs_waiting_idx ON pgqueue.jobs (id) INCLUDE (queue)
  WHERE state = 'waiting';

-- enqueue and enqueue_batch take depends_on (a last parameter), and queue_summary returns a
-- `waiting` column: signatures that CREATE OR REPLACE cannot change. Their grants come back
-- (definitions/90_privileges.sql).
DROP FUNCTION IF EXISTS pgqueue.enqueue(text, jsonb, text, int, timestamptz, int, boolean);
DROP FUNCTION IF EXISTS pgqueue.enqueue_batch(text, jsonb[], text[], int, timestamptz, int, boolean);
DROP FUNCTION IF EXISTS pgqueue.queue_summary();

-- wait_hint says whether a limit holds the queue (a third column): its result type changed.
DROP FUNCTION IF EXISTS pgqueue.wait_hint(text);
