-- ── wake-ups ──────────────────────────────────────────────────────────────────────────────

-- Wakes listeners of a queue from its own transaction, after the jobs it announces committed.
-- NOTIFY holds a cluster-wide lock from pre-commit to the end of the commit; in a transaction
-- that has written nothing else, this function turns off synchronous_commit so that lock is
-- never held across a WAL flush and producers are not serialised by their wake-ups (a lost
-- wake-up is harmless: workers also poll). Cost: one short transaction.
CREATE OR REPLACE FUNCTION pgqueue.wake(p_queue text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  PERFORM pgqueue.check_queue_name(p_queue);
  IF pg_current_xact_id_if_assigned() IS NULL THEN
    PERFORM set_config('synchronous_commit', 'off', true);
  END IF;
  PERFORM pgqueue.notify_queue(p_queue);
END
$$;

-- The insert trigger: a direct INSERT into pgqueue.jobs admits its ready jobs below their claim
-- floors and wakes the listeners of each queue that received a ready job, once per statement.
-- Jobs due later wake them too: an idle claimer then learns the new, earlier due time
-- (pgqueue.wait_hint) instead of sleeping through it. enqueue and enqueue_batch do both
-- themselves (for one queue, priority and due time that is one floor check, not a query over
-- the statement's rows) and set pgqueue.admitting meanwhile: the trigger's WHEN clause then
-- skips the call (a call that returned at once still cost an enqueue 3-4 us). The admission is
-- pgqueue.floor_admit's, written out here for a statement's many rows.
CREATE OR REPLACE FUNCTION pgqueue.notify_new_job()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_first record;
  v_above boolean;
  v_locked_at timestamptz;
BEGIN
  FOR v_first IN
    SELECT DISTINCT ON (n.queue, n.priority) n.queue, n.priority, n.run_after, n.id
      FROM new_jobs n
     WHERE n.state = 'ready'
     ORDER BY n.queue, n.priority, n.run_after, n.id
  LOOP
    -- As floor_admit (see there for why the lock comes first and when a job is noted).
    IF pg_try_advisory_xact_lock_shared(1885434739, hashtext(v_first.queue)) THEN
      v_locked_at := NULL;
    ELSE
      PERFORM pg_advisory_xact_lock_shared(1885434741, hashtext(v_first.queue));
      v_locked_at := clock_timestamp();  -- a move's transaction is open
    END IF;
    SELECT (v_first.run_after, v_first.id) >= (f.run_after, f.id) INTO v_above
      FROM pgqueue.ready_floor f
     WHERE f.queue = v_first.queue AND f.priority = v_first.priority;
    IF v_locked_at IS NOT NULL THEN
      v_above := v_above AND v_first.run_after >= v_locked_at;
    ELSIF v_above IS NULL AND pgqueue.floor_create(v_first.queue, v_first.priority) THEN
      v_above := true;
    END IF;
    IF NOT coalesce(v_above AND (current_setting('transaction_isolation') = 'read committed'
                                 OR v_first.run_after >= clock_timestamp()), false) THEN
      INSERT INTO pgqueue.ready_floor_below (queue, priority, run_after, id)
      VALUES (v_first.queue, v_first.priority, v_first.run_after, v_first.id);
    END IF;
    PERFORM pg_notify(pgqueue.channel(v_first.queue), v_first.queue);  -- folds: one per queue
  END LOOP;
  RETURN NULL;
END
$$;

-- Once per statement (the seed's trigger fired once per row; migration 0002 drops it). Created
-- here rather than in a migration because it needs the function above; only when missing or
-- without its WHEN clause (versions up to 10 called the function to return at once), so a run
-- that changes nothing takes no lock on the jobs table.
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_trigger t
                  WHERE t.tgrelid = 'pgqueue.jobs'::regclass AND t.tgname = 'jobs_notify_insert'
                    AND t.tgfoid = 'pgqueue.notify_new_job()'::regprocedure
                    AND t.tgtype & 1 = 0  -- FOR EACH STATEMENT
                    AND t.tgqual IS NOT NULL) THEN
    DROP TRIGGER IF EXISTS jobs_notify_insert ON pgqueue.jobs;
    CREATE TRIGGER jobs_notify_insert
      AFTER INSERT ON pgqueue.jobs
      REFERENCING NEW TABLE AS new_jobs
      FOR EACH STATEMENT
      WHEN (pg_catalog.current_setting('pgqueue.admitting', true) IS DISTINCT FROM 'on')
      EXECUTE FUNCTION pgqueue.notify_new_job();
  END IF;
END
$$;

-- Raises the error that enqueue's or enqueue_batch's arguments deserve (the slow path of
-- their one inline test), naming the first bad argument.
CREATE OR REPLACE FUNCTION pgqueue.check_enqueue_args(
  p_queue text, p_payload_is_null boolean, p_payload_name text, p_priority int,
  p_run_after timestamptz, p_max_attempts int, p_wake boolean)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  PERFORM pgqueue.check_queue_name(p_queue);
  IF p_payload_is_null THEN
    PERFORM pgqueue.require(NULL::jsonb, p_payload_name);
  END IF;
  PERFORM pgqueue.require(p_priority, 'priority');
  PERFORM pgqueue.require(p_run_after, 'run_after');
  PERFORM pgqueue.require(p_max_attempts, 'max_attempts');
  PERFORM pgqueue.require(p_wake, 'wake');
  PERFORM pgqueue.require_valid(p_max_attempts >= 1, 'max_attempts must be at least 1');
END
$$;
