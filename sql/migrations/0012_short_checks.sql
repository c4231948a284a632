-- The jobs table's two CHECK constraints, the same rules in a shorter stored form. PostgreSQL
-- keeps a CHECK constraint as the text of its expression tree and reads it back (stringToNode)
-- in every INSERT and UPDATE statement on the table: the two took 110,000 instructions per
-- statement, 15% of a one-job claim and as much of each enqueue and ack. The state as one
-- array constant instead of six, the length as one range test instead of two comparisons:
-- 1,674 characters instead of 2,943, about 73,000 instructions (callgrind, one backend
-- enqueueing, claiming and acking one job at a time). A function holding the rules would be
-- shorter still, but would be called for every row: batches of 1,000 pay per row.
-- NOT VALID: the old constraints held for every row but queue names older than version 2
-- (that constraint was NOT VALID already); validating would read the whole table while the
-- upgrade holds its locks. New and updated rows are checked as before.
-- The jobs table's lock, and the depth view's (replaced on every upgrade), at once.
PERFORM pg_temp.pgqueue_lock_tables(ARRAY['pgqueue.jobs', 'pgqueue.depth'], ARRAY[]::text[]);
ALTER TABLE pgqueue.jobs
  DROP CONSTRAINT IF EXISTS jobs_state_check,
  DROP CONSTRAINT IF EXISTS jobs_queue_name_check,
  ADD CONSTRAINT jobs_state_check
    CHECK (state = ANY ('{ready,claimed,done,dead,cancelled,waiting}'::text[])) NOT VALID,
  ADD CONSTRAINT jobs_queue_name_check
    CHECK (octet_length(queue) <@ '[1,255]'::int4range AND queue !~ '[[:cntrl:]]') NOT VALID;
