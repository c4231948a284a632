-- A job keeps its last failures, not only the last one, so that "why does this job keep dying"
-- is answered from its row: pgqueue.jobs.errors, a JSON array of
-- {"attempt": n, "at": time, "holder": worker id, "error": text}, oldest first, at most 10
-- entries (the oldest go first). nack and the janitor (an expired lease) append to it; NULL
-- until the first failure. In no index: a nack rewrites the row anyway, and stays as cheap.
ALTER TABLE pgqueue.jobs ADD COLUMN IF NOT EXISTS errors jsonb;
