-- Periodic jobs: a schedule enqueues a job into its queue at each slot of its cron expression
-- (pgqueue.schedule, pgqueue.cron_next). Claims fire due schedules with the rest of the
-- maintenance (pgqueue.fire_schedules), so whichever process claims next fires them; the row
-- lock and `next_slot` make each slot fire once however many claim at once.
CREATE TABLE IF NOT EXISTS pgqueue.schedules (
  name text PRIMARY KEY,
  queue text NOT NULL,
  cron text NOT NULL,            -- five fields, an @ name, or @every <interval>
  time_zone text NOT NULL DEFAULT 'UTC',
  payload jsonb NOT NULL DEFAULT '{}',
  priority int NOT NULL DEFAULT 0,
  max_attempts int NOT NULL DEFAULT 5,
  -- After a time when nothing fired them: enqueue the latest missed slot ('latest'), or none
  -- ('skip': only a slot fired within its period, at most a minute, of its time).
  catch_up text NOT NULL DEFAULT 'latest' CHECK (catch_up IN ('latest', 'skip')),
  next_slot timestamptz NOT NULL,  -- the next slot to fire
  last_slot timestamptz,           -- the last slot that enqueued a job
  last_job_id bigint,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS schedules_next_slot_idx ON pgqueue.schedules (next_slot);
CREATE INDEX IF NOT EXISTS schedules_queue_idx ON pgqueue.schedules (queue, next_slot);
