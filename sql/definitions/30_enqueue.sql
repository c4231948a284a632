-- ── enqueue ───────────────────────────────────────────────────────────────────────────────

-- Adds one job and returns its id. With an idempotency key, the job already holding that key
-- in the queue is returned instead (also under concurrent calls: no unique violation escapes).
-- Listeners are woken at commit (also when the key already existed, since the caller may count
-- on it to announce other jobs too). p_wake => false defers the wake-up to a pgqueue.wake(queue)
-- the caller runs after commit. A job due now (run_after left at its default, now()) gets the
-- time of this call, not of its transaction's start.
-- It admits its job under the claim floors itself, cheaper than the insert trigger (which it
-- tells to stand aside). The floor lock comes first, so no floor moves past the time read right
-- after it: a job due at that time or later is above every floor without reading one, once
-- its queue and priority have a floor at all. This session remembers that (a floor, once made,
-- is never deleted): the read cost 6 us of a 30 us enqueue. A job due earlier, or the first of its
-- priority that this session enqueues, reads its floor as floor_admit does, and makes the
-- floor when there is none (floor_create).
-- Calls whose result is not needed are assignments to v_done rather than PERFORMs: a PERFORM
-- runs a query through the executor (about 1 us each), an assignment evaluates in place.
-- p_depends_on: ids of jobs it waits for (definitions/77_dependencies.sql has the rules).
CREATE OR REPLACE FUNCTION pgqueue.enqueue(
  p_queue text,
  p_payload jsonb,
  p_idempotency_key text DEFAULT NULL,
  p_priority int DEFAULT 0,
  p_run_after timestamptz DEFAULT now(),
  p_max_attempts int DEFAULT 5,
  p_wake boolean DEFAULT true,
  p_depends_on bigint[] DEFAULT NULL
)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
  v_id bigint;
  v_locked_at timestamptz;
  v_run_after timestamptz;
  v_inserted boolean := true;
  v_known text;
  v_above boolean;
  v_committed boolean;
  v_state text := 'ready';
  v_done text;
  v_moving boolean := false;
BEGIN
  -- One inline test on the hot path; the helpers (a call each) only run to name the error.
  IF p_queue IS NULL OR p_payload IS NULL OR p_priority IS NULL OR p_run_after IS NULL
     OR p_max_attempts IS NULL OR p_wake IS NULL OR p_max_attempts < 1
     OR octet_length(p_queue) NOT BETWEEN 1 AND 255 OR p_queue ~ '[[:cntrl:]]'
     OR octet_length(p_idempotency_key) > 255 THEN
    PERFORM pgqueue.check_enqueue_args(p_queue, p_payload IS NULL, 'payload', p_priority,
                                       p_run_after, p_max_attempts, p_wake);
    PERFORM pgqueue.require_valid(coalesce(octet_length(p_idempotency_key), 0) <= 255,
                                  'idempotency_key must be at most 255 bytes');
  END IF;
  IF p_depends_on IS NOT NULL THEN
    v_state := pgqueue.dependencies_check(p_depends_on);  -- locks the parents
  END IF;
  IF NOT pg_try_advisory_xact_lock_shared(1885434739, hashtext(p_queue)) THEN
    -- A floor move's transaction is open: not waiting for it (see 40_claim_floors.sql).
    v_done := pg_advisory_xact_lock_shared(1885434741, hashtext(p_queue))::text;
    v_moving := true;
  END IF;
  v_locked_at := clock_timestamp();
  v_run_after := CASE WHEN p_run_after = now() THEN v_locked_at ELSE p_run_after END;
  v_done := set_config('pgqueue.admitting', 'on', true);  -- the trigger stands aside
  -- Without a key, a plain insert: ON CONFLICT makes an insert speculative, which costs a
  -- WAL record more per row even where the key's index does not apply.
  IF p_idempotency_key IS NULL THEN
    INSERT INTO pgqueue.jobs (queue, payload, priority, run_after, max_attempts, state)
    VALUES (p_queue, p_payload, p_priority, v_run_after, p_max_attempts, v_state)
    RETURNING id INTO v_id;
  ELSE
    LOOP
      INSERT INTO pgqueue.jobs (queue, payload, idempotency_key, priority, run_after, max_attempts,
                                state)
      VALUES (p_queue, p_payload, p_idempotency_key, p_priority, v_run_after, p_max_attempts,
              v_state)
      ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
      RETURNING id INTO v_id;
      EXIT WHEN v_id IS NOT NULL;
      -- Conflict: the holder of the key committed before us (ON CONFLICT waited for it).
      SELECT j.id INTO v_id FROM pgqueue.jobs j
       WHERE j.queue = p_queue AND j.idempotency_key = p_idempotency_key;
      v_inserted := false;
      EXIT WHEN v_id IS NOT NULL;
      -- The holder was deleted in between: insert again.
    END LOOP;
  END IF;
  v_done := set_config('pgqueue.admitting', 'off', true);
  IF v_state = 'waiting' AND v_inserted THEN
    PERFORM pgqueue.dependencies_add(ARRAY[v_id], p_depends_on);
    v_inserted := false;  -- not ready: nothing to admit under the floors
  END IF;
  -- Whether this session saw the floor of this queue and priority committed (floors are never
  -- removed): then a job due from the call's time is above it, and the floor need not be read.
  -- Remembered in one of 256 session settings, chosen by a hash of the queue and priority,
  -- holding the exact key (one setting per queue and priority made a session that enqueued
  -- into thousands of queues slower with each new one: PostgreSQL sorts a session's settings
  -- again for every new name, 1.7 ms per enqueue into a new queue once 8,000 were known). Two
  -- keys with the same slot take turns; a miss only reads the floor. The key names the floor
  -- table too (a schema dropped and installed again has none of them) and the queue's bytes
  -- in hex. (The key is written out again below rather than kept in a variable: each
  -- expression of a call is set up again in every transaction.)
  v_known := 'pgqueue.floor_known_' || ((hashtext(p_queue) # p_priority) & 255);
  IF v_inserted AND (v_run_after < v_locked_at
                     OR current_setting(v_known, true) IS DISTINCT FROM
                        to_hex(p_priority) || '_' || 'pgqueue.ready_floor'::regclass::oid || '_'
                        || encode(textsend(p_queue), 'hex')) THEN
    -- This statement's snapshot is taken after the lock (in READ COMMITTED): any move is in it.
    SELECT (v_run_after, v_id) >= (f.run_after, f.id), f.moved_at <> now()
      INTO v_above, v_committed
      FROM pgqueue.ready_floor f
     WHERE f.queue = p_queue AND f.priority = p_priority;
    IF v_moving THEN
      -- The open move may put the floor above a job due before v_locked_at, and makes none.
      v_above := v_above AND v_run_after >= v_locked_at;
    ELSIF v_above IS NULL AND pgqueue.floor_create(p_queue, p_priority) THEN
      v_above := true;  -- the new floor is at the start of time
    END IF;
    -- Remembered only for a floor that another transaction made or moved (its moved_at is not
    -- this transaction's now()): one made here may be undone with this transaction, and after
    -- PREPARE TRANSACTION and ROLLBACK PREPARED the session keeps its settings.
    IF v_committed THEN
      v_done := set_config(v_known,
                           to_hex(p_priority) || '_' || 'pgqueue.ready_floor'::regclass::oid || '_'
                           || encode(textsend(p_queue), 'hex'), false);
    END IF;
    IF NOT coalesce(v_above AND (current_setting('transaction_isolation') = 'read committed'
                                 OR v_run_after >= v_locked_at), false) THEN
      INSERT INTO pgqueue.ready_floor_below (queue, priority, run_after, id)
      VALUES (p_queue, p_priority, v_run_after, v_id);
    END IF;
  END IF;
  IF p_wake THEN
    PERFORM pg_notify(pgqueue.channel(p_queue), p_queue);  -- folds with others of this queue
  END IF;
  RETURN v_id;
END
$$;

-- Adds many jobs to one queue in one statement and returns their ids in input order. Keys
-- (optional, same length as the payloads) dedupe against existing jobs and within the batch.
-- Wakes listeners as enqueue does (with keys, also when every key already existed). Jobs due
-- now get the time of this call, as enqueue's do. p_depends_on: ids of jobs that every job of
-- the batch waits for (as enqueue's; a job whose key already existed gets no edges).
CREATE OR REPLACE FUNCTION pgqueue.enqueue_batch(
  p_queue text,
  p_payloads jsonb[],
  p_idempotency_keys text[] DEFAULT NULL,
  p_priority int DEFAULT 0,
  p_run_after timestamptz DEFAULT now(),
  p_max_attempts int DEFAULT 5,
  p_wake boolean DEFAULT true,
  p_depends_on bigint[] DEFAULT NULL
)
RETURNS bigint[]
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
SET plan_cache_mode = force_generic_plan  -- two of its statements were planned on every call
AS $$
DECLARE
  v_n int;
  v_ids bigint[];
  v_run_after timestamptz;
  v_locked_at timestamptz;
  v_state text := 'ready';
BEGIN
  IF p_queue IS NULL OR p_payloads IS NULL OR p_priority IS NULL OR p_run_after IS NULL
     OR p_max_attempts IS NULL OR p_wake IS NULL OR p_max_attempts < 1
     OR octet_length(p_queue) NOT BETWEEN 1 AND 255 OR p_queue ~ '[[:cntrl:]]' THEN
    PERFORM pgqueue.check_enqueue_args(p_queue, p_payloads IS NULL, 'payloads', p_priority,
                                       p_run_after, p_max_attempts, p_wake);
  END IF;
  v_n := coalesce(cardinality(p_payloads), 0);
  -- array_position would refuse a multidimensional array with its own error (0A000); keys in
  -- one would be paired with the payloads as if flattened.
  IF array_ndims(p_payloads) <> 1 OR coalesce(array_ndims(p_idempotency_keys), 1) <> 1 THEN
    PERFORM pgqueue.require_valid(array_ndims(p_payloads) = 1,
                                  'payloads must be a one-dimensional array');
    PERFORM pgqueue.require_valid(coalesce(array_ndims(p_idempotency_keys), 1) = 1,
                                  'idempotency keys must be a one-dimensional array');
  END IF;
  PERFORM pgqueue.require_valid(array_position(p_payloads, NULL) IS NULL,
                                'payloads must not contain NULL');
  PERFORM pgqueue.require_valid(
    p_idempotency_keys IS NULL OR cardinality(p_idempotency_keys) = v_n,
    format('%s idempotency keys for %s payloads', cardinality(p_idempotency_keys), v_n));
  IF p_idempotency_keys IS NOT NULL THEN
    PERFORM pgqueue.require_valid(
      NOT EXISTS (SELECT FROM unnest(p_idempotency_keys) k WHERE octet_length(k) > 255),
      'idempotency keys must be at most 255 bytes');
  END IF;
  IF p_depends_on IS NOT NULL THEN
    v_state := pgqueue.dependencies_check(p_depends_on);  -- locks the parents
  END IF;
  -- Nothing to add, after the same checks as a batch of any size: an empty batch with bad
  -- arguments (an unknown dependency, keys without payloads) is refused, not ignored.
  IF v_n = 0 THEN
    RETURN '{}';
  END IF;
  -- Ids are drawn first so each input position knows its id without relying on RETURNING order.
  v_ids := ARRAY(SELECT nextval('pgqueue.jobs_id_seq') FROM generate_series(1, v_n));
  -- The floor lock, as enqueue takes it: due now, the batch then needs only its floor to exist.
  IF NOT pg_try_advisory_xact_lock_shared(1885434739, hashtext(p_queue)) THEN
    PERFORM pg_advisory_xact_lock_shared(1885434741, hashtext(p_queue));
  END IF;
  v_locked_at := clock_timestamp();
  -- Due now: from this call, as enqueue's jobs (a transaction's jobs stay in call order).
  v_run_after := CASE WHEN p_run_after = now() THEN v_locked_at ELSE p_run_after END;
  PERFORM set_config('pgqueue.admitting', 'on', true);  -- the trigger stands aside
  IF p_idempotency_keys IS NULL THEN
    -- A plain insert, as in enqueue.
    INSERT INTO pgqueue.jobs (id, queue, payload, priority, run_after, max_attempts, state)
    SELECT v_ids[t.ord], p_queue, t.payload, p_priority, v_run_after, p_max_attempts, v_state
      FROM unnest(p_payloads) WITH ORDINALITY AS t(payload, ord)
     ORDER BY t.ord;
  ELSE
    INSERT INTO pgqueue.jobs (id, queue, payload, idempotency_key, priority, run_after,
                              max_attempts, state)
    SELECT v_ids[t.ord], p_queue, t.payload, t.key, p_priority, v_run_after, p_max_attempts,
           v_state
      FROM unnest(p_payloads, p_idempotency_keys) WITH ORDINALITY AS t(payload, key, ord)
     ORDER BY t.ord
    ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING;
  END IF;
  PERFORM set_config('pgqueue.admitting', 'off', true);
  IF v_state = 'waiting' THEN  -- the drawn ids: those a key turned away are not jobs
    PERFORM pgqueue.dependencies_add(v_ids, p_depends_on);
  ELSE
    -- Every job of the batch has one queue, priority and due time, and the first drawn id is
    -- the lowest: admitting that one admits them all (one a key turned away is no job, and a
    -- claim start below a job is harmless). Due no earlier than the time read after the lock
    -- under an existing floor, it is above the floor (see floor_admit).
    IF v_run_after < v_locked_at
       OR NOT EXISTS (SELECT FROM pgqueue.ready_floor f
                       WHERE f.queue = p_queue AND f.priority = p_priority) THEN
      PERFORM pgqueue.floor_admit(p_queue, p_priority, v_run_after, v_ids[1]);
    END IF;
  END IF;
  -- (With keys also when every key already existed, as enqueue.)
  IF p_wake AND (v_state = 'ready' OR p_idempotency_keys IS NOT NULL) THEN
    PERFORM pg_notify(pgqueue.channel(p_queue), p_queue);
  END IF;
  IF p_idempotency_keys IS NOT NULL THEN
    -- A keyed position gets the id of whichever job holds its key (ours or an earlier one).
    v_ids := ARRAY(
      SELECT CASE WHEN t.key IS NULL THEN v_ids[t.ord]
                  ELSE (SELECT j.id FROM pgqueue.jobs j
                         WHERE j.queue = p_queue AND j.idempotency_key = t.key) END
        FROM unnest(p_idempotency_keys) WITH ORDINALITY AS t(key, ord)
       ORDER BY t.ord);
    IF array_position(v_ids, NULL) IS NOT NULL THEN
      RAISE EXCEPTION 'pgqueue: a job holding one of the idempotency keys was deleted concurrently'
        USING ERRCODE = 'serialization_failure', HINT = 'Retry the call.';
    END IF;
  END IF;
  RETURN v_ids;
END
$$;
