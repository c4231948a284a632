-- Whether a queue is paused or limited, on the floor rows that every claim reads anyway
-- (pgqueue.ready_floor.held): a claim's first pass looked at paused_queues and queue_limits on
-- every call, two probes and four relations more per claim transaction. The two tables stay
-- the truth; `held` only sends a claim to the statement that reads them (definitions/
-- 40_claim_floors.sql, floor_hold, has the rule that keeps it true while a queue is held).
-- No pause or limit may change while the rows are set: their tables are locked until the
-- upgrade commits. A call of version 10's code already waiting behind this upgrade's lock
-- that makes a floor runs its old code once through, leaving `held` false; the queue's next
-- floor move (claims make one within a second) sets it from the tables.
ALTER TABLE pgqueue.ready_floor ADD COLUMN IF NOT EXISTS held boolean NOT NULL DEFAULT false;
LOCK TABLE pgqueue.paused_queues, pgqueue.queue_limits IN SHARE MODE;
UPDATE pgqueue.ready_floor f SET held = true
 WHERE EXISTS (SELECT FROM pgqueue.paused_queues p WHERE p.queue = f.queue)
    OR EXISTS (SELECT FROM pgqueue.queue_limits l WHERE l.queue = f.queue);
