-- Whether a queue is paused or limited, on the floor rows that every claim reads anyway
-- (pgqueue.ready_floor.held): a claim's first pass looked at paused_queues and queue_limits on
-- every call, two probes and four relations more per claim transaction. The two tables stay
-- the truth; `held` only sends a claim to the statement that reads them (definitions/
-- 40_claim_floors.sql, floor_hold, has the rule that keeps it true while a queue is held).
-- No pause or limit may change while the rows are set: their tables are locked until the
-- upgrade commits. A call of version 10's code already waiting behind this upgrade's lock
-- that makes a floor runs its old code once through, leaving `held` false; the queue's next
-- floor move (claims make one within a second) sets it from the tables.

-- Every lock this upgrade takes on the tables clients use, at once and first: the jobs table's
-- for the insert trigger made again (definitions/20_wakeups.sql), ready_floor's for the column,
-- the depth view's (replaced on every upgrade), the pause and limit tables read below. Waiting
-- for one while holding another deadlocked with clients that held the one and wanted the other
-- (found from outside: under load every client call in flight failed with 40P01, or the upgrade
-- did). Each try waits at most 50 ms, far below the deadlock check's second, and gives back what
-- it took when it fails; clients wait meanwhile, none fails.
DECLARE
  v_lock_timeout text := current_setting('lock_timeout');
BEGIN
  PERFORM set_config('lock_timeout', '50ms', true);
  FOR v_try IN 1..600 LOOP
    BEGIN
      LOCK TABLE pgqueue.jobs, pgqueue.ready_floor IN ACCESS EXCLUSIVE MODE;
      IF to_regclass('pgqueue.depth') IS NOT NULL THEN  -- (a fresh install makes it later)
        LOCK TABLE pgqueue.depth IN ACCESS EXCLUSIVE MODE;
      END IF;
      LOCK TABLE pgqueue.paused_queues, pgqueue.queue_limits IN SHARE MODE;
      EXIT;
    EXCEPTION WHEN lock_not_available THEN
      IF v_try = 600 THEN
        RAISE EXCEPTION 'pgqueue: the upgrade could not lock its tables within 30 s'
          USING ERRCODE = 'lock_not_available',
                HINT = 'Transactions that use pgqueue''s tables stayed open; nothing changed. '
                       'Run it again.';
      END IF;
    END;
  END LOOP;
  PERFORM set_config('lock_timeout', v_lock_timeout, true);
END;
ALTER TABLE pgqueue.ready_floor ADD COLUMN IF NOT EXISTS held boolean NOT NULL DEFAULT false;
UPDATE pgqueue.ready_floor f SET held = true
 WHERE EXISTS (SELECT FROM pgqueue.paused_queues p WHERE p.queue = f.queue)
    OR EXISTS (SELECT FROM pgqueue.queue_limits l WHERE l.queue = f.queue);
