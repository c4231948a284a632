-- ── claim floors (pgqueue.ready_floor) ────────────────────────────────────────────────────
-- The rule that keeps every ready job at or above where claims start: whoever makes a job ready
-- holds the queue's floor lock in shared mode from then until its transaction ends, and, when
-- the job is below the queue's floor (or its priority has none), notes it in
-- pgqueue.ready_floor_below. A floor moves up only under the same lock in exclusive mode (not
-- waiting for it: the move is skipped while any such transaction is open, and a later claim
-- tries again), to what a snapshot taken under the lock sees, and never above the time read
-- before the move took the lock. So no job is passed: one whose transaction was open during a
-- move is noted below when it is written after it; one written before it is seen by it.
-- A move holds the lock until its transaction ends, which may be long (a claim as the first
-- statement of a longer transaction). Whoever makes a job ready does not wait for that: when
-- the lock is taken exclusively it holds the queue's pending lock in shared mode instead, until
-- its transaction ends (so the next move is skipped while it is open, as above), and notes its
-- job below unless the job is due no earlier than the time read after that (the open move's
-- floor stays below that time) and its priority has a floor (the open move makes none that it
-- does not know of). A move takes that lock exclusively only for a moment, so it never waits.
-- The locks are advisory locks in the two-int space (1885434739 = 'pgqs', 1885434741 = 'pgqu'
-- for pending, and the queue's hash), apart from applications' one-bigint advisory locks; two
-- queues sharing a hash only share the locks.

-- Admits a job made ready at (p_run_after, p_id) in claim order (a nack, release, reset or
-- retry of a job that was ready before, or a waiting job whose parents are done), after its
-- row was written: notes it below when it is below its floor. A job due no earlier than the
-- time read once the lock is held is above the floor (a move never puts a floor above its own
-- time, and none runs while the lock is held), so it needs only the floor to exist: one index
-- probe. Otherwise the floor is read, and made when there is none (floor_create); rarely a
-- write. In REPEATABLE READ or SERIALIZABLE the snapshot may predate a move, so there such a
-- job is always noted (unless due later under a floor its snapshot sees). While a move's
-- transaction is open: the pending lock instead, and the job noted unless due later under a
-- floor (see the top of this file).
CREATE OR REPLACE FUNCTION pgqueue.floor_admit(
  p_queue text, p_priority int, p_run_after timestamptz, p_id bigint)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_above boolean;
  v_moving boolean := false;
BEGIN
  IF NOT pg_try_advisory_xact_lock_shared(1885434739, hashtext(p_queue)) THEN
    PERFORM pg_advisory_xact_lock_shared(1885434741, hashtext(p_queue));
    v_moving := true;
  END IF;
  -- (A waiting job was never admitted: its queue and priority may have no floor, and a job
  -- due later in a priority without one was never claimed.)
  IF p_run_after >= clock_timestamp()
     AND EXISTS (SELECT FROM pgqueue.ready_floor f
                  WHERE f.queue = p_queue AND f.priority = p_priority) THEN
    RETURN;
  END IF;
  IF v_moving THEN
    INSERT INTO pgqueue.ready_floor_below (queue, priority, run_after, id)
    VALUES (p_queue, p_priority, p_run_after, p_id);
    RETURN;
  END IF;
  -- In READ COMMITTED this statement's snapshot is taken after the lock: any move is in it.
  SELECT (p_run_after, p_id) >= (f.run_after, f.id) INTO v_above
    FROM pgqueue.ready_floor f
   WHERE f.queue = p_queue AND f.priority = p_priority;
  IF v_above IS NULL AND pgqueue.floor_create(p_queue, p_priority) THEN
    v_above := true;  -- the new floor is at the start of time
  END IF;
  IF v_above AND current_setting('transaction_isolation') = 'read committed' THEN
    RETURN;
  END IF;
  INSERT INTO pgqueue.ready_floor_below (queue, priority, run_after, id)
  VALUES (p_queue, p_priority, p_run_after, p_id);
END
$$;

-- Makes the first floor of p_queue's priority p_priority, at the start of time: every job is
-- above it, so no job of that priority needs noting below it from then on (until a queue's
-- first claim made its floors, each of its jobs enqueued one per call was noted: a backlog
-- built before any worker ran was noted row by row, and each claim read and sorted them all
-- until the first fold). For callers that hold the floor lock in shared mode and found no
-- floor under it: none can appear meanwhile except one made here, as the floors' other writer,
-- floor_advance, needs the lock exclusively. Only one transaction at a time makes one (a lock
-- of its own, not waited for), so no caller waits on another's uncommitted row; one that loses
-- notes its job below as before. Only in READ COMMITTED: an older snapshot may miss a floor
-- made since. True when the floor exists after the call (made here or just before).
CREATE OR REPLACE FUNCTION pgqueue.floor_create(p_queue text, p_priority int)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF current_setting('transaction_isolation') <> 'read committed'
     OR NOT pg_try_advisory_xact_lock(1885434740, hashtext(p_queue)) THEN
    RETURN false;
  END IF;
  -- A floor committed since the caller looked (by the lock's previous holder) is at the start
  -- of time too (no move can have run: the caller holds the floor lock shared). Holding the
  -- lock, this statement sees every pause and limit committed (see floor_hold_lock).
  INSERT INTO pgqueue.ready_floor (queue, priority, run_after, id, moved_at, held)
  VALUES (p_queue, p_priority, '-infinity', 0, now(), pgqueue.queue_held(p_queue))
  ON CONFLICT (queue, priority) DO NOTHING;
  RETURN true;
END
$$;

-- Whether p_queue is paused or has limits, as this statement's snapshot sees it.
CREATE OR REPLACE FUNCTION pgqueue.queue_held(p_queue text)
RETURNS boolean
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RETURN EXISTS (SELECT FROM pgqueue.paused_queues p WHERE p.queue = p_queue)
      OR EXISTS (SELECT FROM pgqueue.queue_limits l WHERE l.queue = p_queue);
END
$$;

-- Takes the locks under which pause, resume and set_queue_limits change whether p_queue is held
-- and then mark its floors (floor_hold): first, before their own writes, so that none of them
-- holds a row a claim waits for while it waits for a claim's floor lock (a deadlock). The rule
-- that keeps `held` true on every floor of a held queue (claims skip their first pass there,
-- which does not look at pauses or limits): a floor is made (floor_create) or moved
-- (floor_advance) only under a lock that these wait for (the make lock, or the floor lock
-- exclusively), and computes `held` in a statement after taking it; floor_hold updates the
-- floors in a statement after both. So whichever comes second sees the other's commit: no floor
-- is made or moved from a snapshot that misses a pause or limit, and none is missed by it. Waits
-- for an open transaction that made a floor of the queue (rare: the first job of a priority) or
-- moved one (a claim as a transaction of its own). Only in READ COMMITTED (22023 otherwise),
-- where each statement sees what committed before it: an older snapshot could miss a floor made
-- since, which would then never be held.
CREATE OR REPLACE FUNCTION pgqueue.floor_hold_lock(p_queue text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'pgqueue: pause, resume and set_queue_limits run in READ COMMITTED only'
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Call it outside the REPEATABLE READ or SERIALIZABLE transaction, or, when that'
                   || ' level is the session''s default, after SET default_transaction_isolation'
                   || ' = ''read committed''.';
  END IF;
  PERFORM pg_advisory_xact_lock(1885434740, hashtext(p_queue));
  PERFORM pg_advisory_xact_lock_shared(1885434739, hashtext(p_queue));
END
$$;

-- Sets `held` on p_queue's floors to whether the queue is paused or limited, after a change
-- made under floor_hold_lock in this transaction.
CREATE OR REPLACE FUNCTION pgqueue.floor_hold(p_queue text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_held boolean;
BEGIN
  v_held := pgqueue.queue_held(p_queue);
  UPDATE pgqueue.ready_floor f SET held = v_held
   WHERE f.queue = p_queue AND f.held IS DISTINCT FROM v_held;
END
$$;

-- Where claims of p_queue start, per priority (highest first): the lower of the floor and the
-- jobs noted below it; and in every row, whether any of the queue's floors is held (paused or
-- limited: see floor_hold), NULL when the queue has no floor row, so that a claim reads the
-- floors once (the notes below carry no hold: a window over all rows, before DISTINCT ON, so a
-- priority with notes only still sees its queue's hold). Plain SQL without SECURITY DEFINER or SET clauses (its callers run as
-- the owner with a pinned search_path, and no role may call it) so that the planner inlines it
-- into the caller's query: as a separate call it cost each claim about 10 us, 5% of a claim.
CREATE OR REPLACE FUNCTION pgqueue.floor_starts(p_queue text)
RETURNS TABLE (priority int, run_after timestamptz, id bigint, held boolean)
LANGUAGE sql STABLE
AS $$
  SELECT DISTINCT ON (x.priority) x.priority, x.run_after, x.id, bool_or(x.held) OVER ()
    FROM (SELECT f.priority, f.run_after, f.id, f.held FROM pgqueue.ready_floor f
           WHERE f.queue = p_queue
          UNION ALL
          SELECT b.priority, b.run_after, b.id, NULL FROM pgqueue.ready_floor_below b
           WHERE b.queue = p_queue) x
   ORDER BY x.priority DESC, x.run_after, x.id
$$;

-- Moves each floor of p_queue up to its first ready job, or to the time read before the lock
-- when that is later (or there is none), and folds in the jobs noted below that it saw; does
-- nothing when a transaction that makes jobs of the queue ready is open (a later claim tries
-- again). It reads the dead entries between the old floor and the first ready job once, so that
-- claims do not. Holds the floor lock until the caller's transaction ends: the queue's
-- producers do not wait for it, but the next move and pause, resume and set_queue_limits do, so
-- claims call it only as a statement of its own. Only in READ COMMITTED: an older snapshot
-- could miss a job committed since.
CREATE OR REPLACE FUNCTION pgqueue.floor_advance(p_queue text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_start record;
  v_bound timestamptz;
  v_run_after timestamptz;
  v_id bigint;
  v_held boolean;
  v_notes tid[];
BEGIN
  -- Before the locks: a producer that finds the floor lock taken reads its time after them.
  v_bound := clock_timestamp();
  -- Skipped while a producer that did not wait for the previous move is open; looked at before
  -- the floor lock, which a skipped move would otherwise hold for nothing until its transaction
  -- ends (making the producers meanwhile take the pending lock and skip the next move too). A
  -- producer that takes the pending lock after this look reads its time after v_bound.
  -- (Taken and given back in one expression: no interrupt can leave it taken for the session.)
  IF current_setting('transaction_isolation') <> 'read committed'
     OR NOT (CASE WHEN pg_try_advisory_lock(1885434741, hashtext(p_queue))
                  THEN pg_advisory_unlock(1885434741, hashtext(p_queue)) ELSE false END) THEN
    RETURN;
  END IF;
  IF NOT pg_try_advisory_xact_lock(1885434739, hashtext(p_queue)) THEN
    RETURN;
  END IF;
  -- The notes this move folds in: those committed before its reads of the jobs. (Each statement
  -- here sees what committed before it; a note committed later, by a producer that did not
  -- wait, may be of a job those reads missed.)
  v_notes := ARRAY(SELECT b.ctid FROM pgqueue.ready_floor_below b WHERE b.queue = p_queue);
  v_held := pgqueue.queue_held(p_queue);  -- after the lock (see floor_hold_lock)
  FOR v_start IN SELECT * FROM pgqueue.floor_starts(p_queue) LOOP
    SELECT j.run_after, j.id INTO v_run_after, v_id
      FROM pgqueue.jobs j
     WHERE j.queue = p_queue AND j.state = 'ready' AND j.priority = v_start.priority
       AND (j.run_after, j.id) >= (v_start.run_after, v_start.id)
     ORDER BY j.run_after, j.id
     LIMIT 1;
    IF v_id IS NULL OR (v_run_after, v_id) > (v_bound, 0::bigint) THEN
      v_run_after := v_bound;
      v_id := 0;
    END IF;
    INSERT INTO pgqueue.ready_floor AS f (queue, priority, run_after, id, moved_at, held)
    VALUES (p_queue, v_start.priority, v_run_after, v_id, now(), v_held)
    ON CONFLICT (queue, priority) DO UPDATE
      SET run_after = EXCLUDED.run_after, id = EXCLUDED.id, moved_at = EXCLUDED.moved_at,
          held = EXCLUDED.held;
  END LOOP;
  DELETE FROM pgqueue.ready_floor_below b WHERE b.ctid = ANY (v_notes) AND b.queue = p_queue;
END
$$;
