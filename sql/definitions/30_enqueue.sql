-- ── enqueue ───────────────────────────────────────────────────────────────────────────────

-- Adds one job and returns its id. With an idempotency key, the job already holding that key
-- in the queue is returned instead (also under concurrent calls: no unique violation escapes).
-- Listeners are woken at commit (by the insert trigger; when the key already existed, by this
-- function, since the caller may count on it to announce other jobs too). p_wake => false
-- defers the wake-up to a pgqueue.wake(queue) the caller runs after commit.
CREATE OR REPLACE FUNCTION pgqueue.enqueue(
  p_queue text,
  p_payload jsonb,
  p_idempotency_key text DEFAULT NULL,
  p_priority int DEFAULT 0,
  p_run_after timestamptz DEFAULT now(),
  p_max_attempts int DEFAULT 5,
  p_wake boolean DEFAULT true
)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
  v_id bigint;
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
  IF NOT p_wake THEN
    PERFORM set_config('pgqueue.defer_wake', 'on', true);
  END IF;
  -- Without a key, a plain insert: ON CONFLICT makes an insert speculative, which costs a
  -- WAL record more per row even where the key's index does not apply.
  IF p_idempotency_key IS NULL THEN
    INSERT INTO pgqueue.jobs (queue, payload, priority, run_after, max_attempts)
    VALUES (p_queue, p_payload, p_priority, p_run_after, p_max_attempts)
    RETURNING id INTO v_id;
  END IF;
  WHILE v_id IS NULL LOOP
    INSERT INTO pgqueue.jobs (queue, payload, idempotency_key, priority, run_after, max_attempts)
    VALUES (p_queue, p_payload, p_idempotency_key, p_priority, p_run_after, p_max_attempts)
    ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id INTO v_id;
    IF v_id IS NULL THEN
      -- Conflict: the holder of the key committed before us (ON CONFLICT waited for it).
      SELECT j.id INTO v_id FROM pgqueue.jobs j
       WHERE j.queue = p_queue AND j.idempotency_key = p_idempotency_key;
      IF p_wake THEN
        PERFORM pgqueue.notify_queue(p_queue);
      END IF;
    END IF;
    -- Still NULL: the holder was deleted in between, so insert again.
  END LOOP;
  IF NOT p_wake THEN
    PERFORM set_config('pgqueue.defer_wake', 'off', true);
  END IF;
  RETURN v_id;
END
$$;

-- Adds many jobs to one queue in one statement and returns their ids in input order. Keys
-- (optional, same length as the payloads) dedupe against existing jobs and within the batch.
-- Wakes listeners as enqueue does (with keys, also when every key already existed).
CREATE OR REPLACE FUNCTION pgqueue.enqueue_batch(
  p_queue text,
  p_payloads jsonb[],
  p_idempotency_keys text[] DEFAULT NULL,
  p_priority int DEFAULT 0,
  p_run_after timestamptz DEFAULT now(),
  p_max_attempts int DEFAULT 5,
  p_wake boolean DEFAULT true
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
BEGIN
  IF p_queue IS NULL OR p_payloads IS NULL OR p_priority IS NULL OR p_run_after IS NULL
     OR p_max_attempts IS NULL OR p_wake IS NULL OR p_max_attempts < 1
     OR octet_length(p_queue) NOT BETWEEN 1 AND 255 OR p_queue ~ '[[:cntrl:]]' THEN
    PERFORM pgqueue.check_enqueue_args(p_queue, p_payloads IS NULL, 'payloads', p_priority,
                                       p_run_after, p_max_attempts, p_wake);
  END IF;
  v_n := coalesce(cardinality(p_payloads), 0);
  IF v_n = 0 THEN
    RETURN '{}';
  END IF;
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
  -- Ids are drawn first so each input position knows its id without relying on RETURNING order.
  v_ids := ARRAY(SELECT nextval('pgqueue.jobs_id_seq') FROM generate_series(1, v_n));
  IF NOT p_wake THEN
    PERFORM set_config('pgqueue.defer_wake', 'on', true);
  END IF;
  IF p_idempotency_keys IS NULL THEN
    -- A plain insert, as in enqueue.
    INSERT INTO pgqueue.jobs (id, queue, payload, priority, run_after, max_attempts)
    SELECT v_ids[t.ord], p_queue, t.payload, p_priority, p_run_after, p_max_attempts
      FROM unnest(p_payloads) WITH ORDINALITY AS t(payload, ord)
     ORDER BY t.ord;
  ELSE
    INSERT INTO pgqueue.jobs (id, queue, payload, idempotency_key, priority, run_after,
                              max_attempts)
    SELECT v_ids[t.ord], p_queue, t.payload, t.key, p_priority, p_run_after, p_max_attempts
      FROM unnest(p_payloads, p_idempotency_keys) WITH ORDINALITY AS t(payload, key, ord)
     ORDER BY t.ord
    ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING;
  END IF;
  IF NOT p_wake THEN
    PERFORM set_config('pgqueue.defer_wake', 'off', true);
  END IF;
  IF p_idempotency_keys IS NOT NULL THEN
    IF p_wake THEN
      PERFORM pgqueue.notify_queue(p_queue);
    END IF;
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
