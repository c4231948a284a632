-- ── limits per queue ──────────────────────────────────────────────────────────────────────
-- A queue may carry two fleet-wide limits (pgqueue.queue_limits, one row per limited queue):
-- at most max_claimed of its jobs claimed at once, across every session, and at most `rate`
-- jobs started per rate_period, from a bucket of `burst` tokens that refills continuously
-- (rate / rate_period tokens a second; a claim takes one token per job). claim_batch enforces
-- both under the queue's row lock, so concurrent claimers take turns and the limit holds
-- whatever they do; a claim beyond a limit returns nothing. Idle claimers do not poll for the
-- limit to lift: wait_hint tells them when the next token is due, and a job of a
-- concurrency-limited queue that stops being claimed (ack, nack, release, expiry) wakes the
-- queue's listeners, so the next claim comes at once. A claim of a queue without a row reads
-- nothing of it: the queue's floors say it is not held (pgqueue.floor_hold).

-- Sets p_queue's limits: p_max_claimed jobs claimed at once (NULL: no such limit), and
-- p_rate jobs started per p_rate_period with bursts of up to p_burst (NULL p_rate: no rate
-- limit; p_burst defaults to p_rate, so up to p_rate jobs may start at once after a quiet
-- period). Both NULL removes the queue's limits. Idempotent: setting the limits it has
-- returns false and writes nothing; true when something changed. A new rate limit starts
-- with a full bucket; a changed one keeps its tokens (at most the new burst). Wakes the
-- queue's listeners, since a limit raised or removed may let idle claimers take jobs now.
-- Refuses a limit below 1, a period under a millisecond or over a year, or a burst without a
-- rate with 22023 (a NULL period with 22004), and runs in READ COMMITTED only (22023 otherwise:
-- pgqueue.floor_hold_lock says why).
CREATE OR REPLACE FUNCTION pgqueue.set_queue_limits(
  p_queue text,
  p_max_claimed int DEFAULT NULL,
  p_rate int DEFAULT NULL,
  p_rate_period interval DEFAULT '1 second'::interval,
  p_burst int DEFAULT NULL
)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_burst int;
BEGIN
  PERFORM pgqueue.check_queue_name(p_queue);
  PERFORM pgqueue.require_valid(p_max_claimed IS NULL OR p_max_claimed >= 1,
                                'max_claimed must be at least 1 (NULL: no limit)');
  PERFORM pgqueue.require_valid(p_rate IS NULL OR p_rate >= 1,
                                'rate must be at least 1 (NULL: no limit)');
  PERFORM pgqueue.require(p_rate_period, 'rate_period');
  -- At least a millisecond (what the C++ API reads back) and at most a year (so the next
  -- token's time stays a time).
  PERFORM pgqueue.require_valid(p_rate_period BETWEEN interval '1 millisecond' AND interval '1 year',
                                'rate_period must be between 1 millisecond and 1 year');
  PERFORM pgqueue.require_valid(p_burst IS NULL OR p_burst >= 1, 'burst must be at least 1');
  PERFORM pgqueue.require_valid(p_burst IS NULL OR p_rate IS NOT NULL,
                                'burst needs a rate');
  PERFORM pgqueue.floor_hold_lock(p_queue);
  IF p_max_claimed IS NULL AND p_rate IS NULL THEN
    DELETE FROM pgqueue.queue_limits l WHERE l.queue = p_queue;
  ELSE
    v_burst := CASE WHEN p_rate IS NOT NULL THEN coalesce(p_burst, p_rate) END;
    INSERT INTO pgqueue.queue_limits AS l (queue, max_claimed, rate, rate_period, burst, tokens,
                                           refilled_at)
    VALUES (p_queue, p_max_claimed, p_rate, CASE WHEN p_rate IS NOT NULL THEN p_rate_period END,
            v_burst, coalesce(v_burst, 0), clock_timestamp())
    ON CONFLICT (queue) DO UPDATE
      SET max_claimed = EXCLUDED.max_claimed, rate = EXCLUDED.rate,
          rate_period = EXCLUDED.rate_period, burst = EXCLUDED.burst,
          -- The bucket as it stands now (refilled at the old rate until now), at most the
          -- new burst; a new rate limit starts full.
          tokens = CASE WHEN l.rate IS NULL THEN EXCLUDED.tokens
                        ELSE least(pgqueue.tokens_at(l, clock_timestamp()),
                                   coalesce(EXCLUDED.burst, 0)) END,
          refilled_at = clock_timestamp(),
          updated_at = now()
      WHERE (l.max_claimed, l.rate, l.rate_period, l.burst)
            IS DISTINCT FROM (EXCLUDED.max_claimed, EXCLUDED.rate, EXCLUDED.rate_period,
                              EXCLUDED.burst);
  END IF;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  UPDATE pgqueue.queue_limits_changed SET changed_at = now();
  PERFORM pgqueue.floor_hold(p_queue);
  -- As a place freed: claimers the old limits held may take jobs now.
  PERFORM pg_notify(pgqueue.channel(p_queue), p_queue || E'\nfreed');
  RETURN true;
END
$$;

-- The limits of every limited queue and where they stand: jobs claimed now, and the tokens
-- in the bucket now (a fraction while it refills). Reads one row per limited queue and counts
-- each concurrency-limited queue's claimed jobs.
CREATE OR REPLACE FUNCTION pgqueue.limits()
RETURNS TABLE (
  queue text,
  max_claimed int,
  claimed bigint,
  rate int,
  rate_period interval,
  burst int,
  tokens float8
)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
BEGIN
  RETURN QUERY
  SELECT l.queue, l.max_claimed,
         (SELECT count(*) FROM pgqueue.jobs j WHERE j.queue = l.queue AND j.state = 'claimed'),
         l.rate, l.rate_period, l.burst, pgqueue.tokens_at(l, clock_timestamp())
    FROM pgqueue.queue_limits l
   ORDER BY l.queue;
END
$$;

-- The tokens in a queue's bucket at p_at (NULL without a rate limit): what was left at the last
-- take, refilled at rate / rate_period since, up to the burst.
CREATE OR REPLACE FUNCTION pgqueue.tokens_at(p_limits pgqueue.queue_limits, p_at timestamptz)
RETURNS float8
LANGUAGE sql IMMUTABLE
AS $$
  SELECT CASE WHEN p_limits.rate IS NOT NULL THEN
    LEAST(p_limits.burst::float8,
          -- (OPERATOR() forms all bind alike, left to right: hence the parentheses)
          p_limits.tokens OPERATOR(pg_catalog.+)
            ((GREATEST(0::float8, pg_catalog.date_part('epoch', p_at OPERATOR(pg_catalog.-)
                                                                p_limits.refilled_at))
              OPERATOR(pg_catalog.*) p_limits.rate::float8)
             OPERATOR(pg_catalog./) pg_catalog.date_part('epoch', p_limits.rate_period)))
  END
$$;

-- Wakes the listeners of those of p_queues that have a concurrency limit: a job of theirs
-- stopped being claimed, so an idle claimer waiting for a free place may take one now. The
-- payload is the queue's name and a line 'freed': a claimer that a limit holds (wait_hint's
-- `held`) waits for such a notification, not for every enqueue's. With no limited queue, one
-- look at an empty table.
CREATE OR REPLACE FUNCTION pgqueue.slots_freed(p_queues text[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  PERFORM pg_notify(pgqueue.channel(l.queue), l.queue || E'\nfreed')
     FROM pgqueue.queue_limits l
    WHERE l.max_claimed IS NOT NULL AND l.queue = ANY (p_queues);
END
$$;
