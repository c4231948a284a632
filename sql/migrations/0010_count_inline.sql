-- ack and ack_batch count done jobs in their own statements now (pgqueue.counter_slot picks the
-- slot); nothing calls count_done any more.
DROP FUNCTION IF EXISTS pgqueue.count_done(text[]);
