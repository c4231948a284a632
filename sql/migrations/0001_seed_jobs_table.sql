-- The jobs table in the seed's shape: a database with the seed installed is at version 1.
-- Later versions change its indexes and constraints, and add columns, but keep these ones, so
-- seed callers that read the table directly keep working.
CREATE TABLE IF NOT EXISTS pgqueue.jobs (
  id bigserial PRIMARY KEY,
  queue text NOT NULL,
  payload jsonb NOT NULL,
  idempotency_key text,
  state text NOT NULL DEFAULT 'ready'
    CHECK (state IN ('ready', 'claimed', 'done', 'dead')),
  priority int NOT NULL DEFAULT 0,          -- higher = sooner
  run_after timestamptz NOT NULL DEFAULT now(),
  attempts int NOT NULL DEFAULT 0,          -- attempts used (release gives one back)
  max_attempts int NOT NULL DEFAULT 5,
  last_error text,                          -- the most recent error, at most 2000 characters
  claimed_by text,
  claimed_at timestamptz,
  lease_until timestamptz,                  -- in no index, so a heartbeat is a HOT update
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz
);
