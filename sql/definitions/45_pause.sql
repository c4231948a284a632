-- ── pause and resume ──────────────────────────────────────────────────────────────────────
-- A paused queue accepts jobs and hands none out: claim_batch returns nothing and wait_hint
-- tells idle claimers that nothing is due, so they wait for a notification (or their poll
-- interval) rather than poll. Jobs already claimed run on and may be acked, nacked or released;
-- expired leases still come back (as ready jobs, claimed after the resume). resume wakes the
-- queue's listeners, so idle workers claim at once.

-- Pauses p_queue. True when it was running (false: it was paused already). Changes no job.
-- READ COMMITTED only (22023 otherwise), as resume (pgqueue.floor_hold_lock says why).
CREATE OR REPLACE FUNCTION pgqueue.pause(p_queue text)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  PERFORM pgqueue.check_queue_name(p_queue);
  PERFORM pgqueue.floor_hold_lock(p_queue);
  INSERT INTO pgqueue.paused_queues (queue, paused_by) VALUES (p_queue, session_user)
  ON CONFLICT (queue) DO NOTHING;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM pgqueue.floor_hold(p_queue);
  -- A claim in REPEATABLE READ or SERIALIZABLE whose snapshot predates this pause fails (40001)
  -- on this row rather than claiming (as for a change of limits).
  UPDATE pgqueue.queue_limits_changed SET changed_at = now();
  RETURN true;
END
$$;

-- Resumes p_queue and wakes its listeners (at commit). True when it was paused.
CREATE OR REPLACE FUNCTION pgqueue.resume(p_queue text)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  PERFORM pgqueue.check_queue_name(p_queue);
  PERFORM pgqueue.floor_hold_lock(p_queue);
  DELETE FROM pgqueue.paused_queues q WHERE q.queue = p_queue;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM pgqueue.floor_hold(p_queue);
  PERFORM pgqueue.notify_queue(p_queue);
  RETURN true;
END
$$;
