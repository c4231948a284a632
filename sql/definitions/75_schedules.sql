-- ── schedules (periodic jobs) ─────────────────────────────────────────────────────────────

-- One field of a cron expression as the sorted values it allows, between p_min and p_max:
-- `*`, `n`, `a-b`, any of them with `/step`, comma-separated; `p_names` (if given) are the
-- names of p_min, p_min + 1, ... (JAN..DEC, SUN..SAT) in any case. A day of week of 7 is
-- Sunday (0). Refuses anything else with 22023 naming the field.
CREATE OR REPLACE FUNCTION pgqueue.cron_field(p_text text, p_field text, p_min int, p_max int,
                                              p_names text[] DEFAULT NULL)
RETURNS int[]
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_part text;
  v_range text;
  v_step int;
  v_lo int;
  v_hi int;
  v_out int[] := '{}';
  v_m text[];
  v_top int := CASE WHEN p_field = 'day of week' THEN 7 ELSE p_max END;
BEGIN
  IF p_text IS NULL OR p_text = '' THEN
    RAISE EXCEPTION 'pgqueue: cron %: empty', p_field USING ERRCODE = 'invalid_parameter_value';
  END IF;
  FOREACH v_part IN ARRAY string_to_array(upper(p_text), ',') LOOP
    v_m := regexp_match(v_part, '^([^/]+)(?:/([0-9]{1,4}))?$');
    IF v_m IS NULL THEN
      RAISE EXCEPTION 'pgqueue: cron %: "%" is not a value, a range or a step', p_field, v_part
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_range := v_m[1];
    v_step := coalesce(v_m[2]::int, 1);
    IF v_step < 1 THEN
      RAISE EXCEPTION 'pgqueue: cron %: a step must be at least 1', p_field
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_range = '*' THEN
      v_lo := p_min;
      v_hi := p_max;
    ELSE
      -- Names stand for their numbers. (Backslashes only in E'' strings: a session with
      -- standard_conforming_strings off read '\m' as 'm'.)
      IF p_names IS NOT NULL THEN
        FOR i IN 1 .. cardinality(p_names) LOOP
          v_range := regexp_replace(v_range, E'\\m' || p_names[i] || E'\\M',
                                    (p_min + i - 1)::text);
        END LOOP;
      END IF;
      v_m := regexp_match(v_range, '^([0-9]{1,2})(?:-([0-9]{1,2}))?$');
      IF v_m IS NULL THEN
        RAISE EXCEPTION 'pgqueue: cron %: "%" is not a value, a range or a step', p_field, v_part
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      v_lo := v_m[1]::int;
      -- `n/step` means n to the field's end, every step (as Vixie cron reads it).
      v_hi := coalesce(v_m[2]::int, CASE WHEN v_m[2] IS NULL AND v_part LIKE '%/%' THEN v_top
                                         ELSE v_lo END);
      IF v_lo < p_min OR v_hi > v_top OR v_lo > v_hi THEN
        RAISE EXCEPTION 'pgqueue: cron %: "%" is outside %-%', p_field, v_part, p_min, v_top
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
    END IF;
    FOR v IN v_lo .. v_hi BY v_step LOOP
      v_out := v_out || CASE WHEN p_field = 'day of week' AND v = 7 THEN 0 ELSE v END;
    END LOOP;
  END LOOP;
  RETURN ARRAY(SELECT DISTINCT u FROM unnest(v_out) u ORDER BY u);
END
$$;

-- A schedule's expression in its five fields (the @ names spelt out), or NULL for `@every`.
CREATE OR REPLACE FUNCTION pgqueue.cron_fields(p_cron text)
RETURNS text[]
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_fields text[];
BEGIN
  PERFORM pgqueue.require(p_cron, 'cron');
  IF lower(p_cron) LIKE '@every %' THEN
    RETURN NULL;
  END IF;
  v_fields := regexp_split_to_array(btrim(CASE lower(btrim(p_cron))
    WHEN '@yearly' THEN '0 0 1 1 *' WHEN '@annually' THEN '0 0 1 1 *'
    WHEN '@monthly' THEN '0 0 1 * *' WHEN '@weekly' THEN '0 0 * * 0'
    WHEN '@daily' THEN '0 0 * * *' WHEN '@midnight' THEN '0 0 * * *'
    WHEN '@hourly' THEN '0 * * * *' ELSE p_cron END), E'\\s+');
  IF cardinality(v_fields) <> 5 THEN
    RAISE EXCEPTION 'pgqueue: cron expression "%" must have five fields (minute hour '
                    'day-of-month month day-of-week), or be @yearly, @monthly, @weekly, @daily, '
                    '@hourly or @every <interval>', p_cron
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN v_fields;
END
$$;

-- The first slot of a schedule strictly after p_after. Five-field cron expressions are matched
-- against the wall clock of p_time_zone, as cron does across daylight-saving changes: a local
-- time that occurs twice (clocks go back) fires once, at its first occurrence, unless the hour
-- field is `*` (then the repeated hour runs like any other); a local time that does not occur
-- (clocks go forward) fires at the end of the gap, unless the hour field is `*` (then there is
-- nothing to run). `@every <interval>` (at least 1 second) fires every interval from p_anchor
-- (by default the epoch), whatever the zone. NULL when the expression can never match (Feb 30).
-- Refuses an invalid expression or zone with 22023.
CREATE OR REPLACE FUNCTION pgqueue.cron_next(p_cron text, p_time_zone text, p_after timestamptz,
                                             p_anchor timestamptz DEFAULT 'epoch')
RETURNS timestamptz
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_fields text[] := pgqueue.cron_fields(p_cron);
  v_every interval;
  v_minutes int[];
  v_hours int[];
  v_doms int[];
  v_months int[];
  v_dows int[];
  v_dom_any boolean;
  v_dow_any boolean;
  v_hour_any boolean;
  v_local timestamp;
  v_day date;
  v_candidate timestamp;
  v_late timestamptz;
  v_early timestamptz;
  v_slot timestamptz;
  v_best timestamptz;
  v_day_ok boolean;
  h int;
  m int;
  g int;
BEGIN
  PERFORM pgqueue.require(p_after, 'after');
  PERFORM pgqueue.require(p_time_zone, 'time_zone');
  BEGIN
    v_local := p_after AT TIME ZONE p_time_zone;
  EXCEPTION WHEN invalid_parameter_value THEN  -- (reading pg_timezone_names costs 20 ms)
    RAISE EXCEPTION 'pgqueue: unknown time zone "%"', p_time_zone
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'A name from pg_timezone_names, such as Europe/Berlin or UTC.';
  END;
  IF v_fields IS NULL THEN
    BEGIN
      v_every := substr(btrim(p_cron), 8)::interval;
    EXCEPTION WHEN data_exception THEN
      v_every := NULL;
    END;
    IF v_every IS NULL OR v_every < interval '1 second'
       OR extract(epoch FROM v_every) <> floor(extract(epoch FROM v_every)) THEN
      RAISE EXCEPTION 'pgqueue: "%" needs a whole number of seconds, at least 1 (@every 30 seconds)',
                      p_cron USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The next multiple of the interval after the anchor (in seconds: months vary).
    RETURN p_anchor + make_interval(secs => extract(epoch FROM v_every) *
      (floor(extract(epoch FROM p_after - p_anchor) / extract(epoch FROM v_every)) + 1));
  END IF;
  v_minutes := pgqueue.cron_field(v_fields[1], 'minute', 0, 59);
  v_hours := pgqueue.cron_field(v_fields[2], 'hour', 0, 23);
  v_doms := pgqueue.cron_field(v_fields[3], 'day of month', 1, 31);
  v_months := pgqueue.cron_field(v_fields[4], 'month', 1, 12,
    ARRAY['JAN','FEB','MAR','APR','MAY','JUN','JUL','AUG','SEP','OCT','NOV','DEC']);
  v_dows := pgqueue.cron_field(v_fields[5], 'day of week', 0, 6,
    ARRAY['SUN','MON','TUE','WED','THU','FRI','SAT']);
  v_dom_any := v_fields[3] = '*';
  v_dow_any := v_fields[5] = '*';
  v_hour_any := v_fields[2] = '*';
  -- From the local day of p_after (less one: its first hour may be the second occurrence of
  -- a repeated hour), over eight years (every day-of-month/day-of-week pair recurs by then).
  v_local := p_after AT TIME ZONE p_time_zone;
  v_day := v_local::date - 1;
  FOR d IN 0 .. 366 * 8 LOOP
    -- Day of month and day of week: either, when both are restricted (as cron does).
    v_day_ok := extract(month FROM v_day + d)::int = ANY (v_months)
      AND CASE WHEN v_dom_any AND v_dow_any THEN true
               WHEN v_dom_any THEN extract(dow FROM v_day + d)::int = ANY (v_dows)
               WHEN v_dow_any THEN extract(day FROM v_day + d)::int = ANY (v_doms)
               ELSE extract(day FROM v_day + d)::int = ANY (v_doms)
                 OR extract(dow FROM v_day + d)::int = ANY (v_dows) END;
    IF v_day_ok THEN
      v_best := NULL;
      FOREACH h IN ARRAY v_hours LOOP
        FOREACH m IN ARRAY v_minutes LOOP
          v_candidate := (v_day + d) + make_interval(hours => h, mins => m);
          v_late := v_candidate AT TIME ZONE p_time_zone;  -- PostgreSQL takes the later one
          IF (v_late AT TIME ZONE p_time_zone) <> v_candidate THEN
            -- Not a time of that day (clocks went forward): the end of the gap, or nothing.
            CONTINUE WHEN v_hour_any;
            -- The end of the gap: the first local minute after it that exists (gaps are whole
            -- minutes, at most a few hours; half-hour shifts too).
            v_slot := NULL;
            FOR g IN 1 .. 240 LOOP
              IF ((v_candidate + make_interval(mins => g)) AT TIME ZONE p_time_zone)
                   AT TIME ZONE p_time_zone = v_candidate + make_interval(mins => g) THEN
                v_slot := (v_candidate + make_interval(mins => g)) AT TIME ZONE p_time_zone;
                EXIT;
              END IF;
            END LOOP;
            CONTINUE WHEN v_slot IS NULL;
            IF v_slot > p_after AND (v_best IS NULL OR v_slot < v_best) THEN
              v_best := v_slot;
            END IF;
            CONTINUE;
          END IF;
          -- An earlier instant with the same wall time: clocks went back by the difference
          -- of the zone's offsets three hours before and at v_late (an hour, or half of one).
          v_early := v_late - (((v_late - interval '3 hours') AT TIME ZONE p_time_zone)
                               - ((v_late - interval '3 hours') AT TIME ZONE 'UTC')
                               - ((v_late AT TIME ZONE p_time_zone) - (v_late AT TIME ZONE 'UTC')));
          IF v_early < v_late AND (v_early AT TIME ZONE p_time_zone) = v_candidate THEN
            -- Twice that day (clocks went back): the first, and the second only with `*`.
            IF v_early > p_after AND (v_best IS NULL OR v_early < v_best) THEN
              v_best := v_early;
            END IF;
            CONTINUE WHEN NOT v_hour_any;
          END IF;
          IF v_late > p_after AND (v_best IS NULL OR v_late < v_best) THEN
            v_best := v_late;
          END IF;
        END LOOP;
      END LOOP;
      IF v_best IS NOT NULL THEN
        RETURN v_best;
      END IF;
    END IF;
  END LOOP;
  RETURN NULL;
END
$$;

-- Declares a periodic job: at each slot of p_cron (see cron_next) a job with p_payload,
-- p_priority and p_max_attempts is enqueued into p_queue. Idempotent: declaring a schedule
-- again as it is changes nothing and returns false; a changed one is updated (its next slot
-- computed again from now when the expression or zone changed) and returns true. Refuses an
-- invalid expression, zone or catch-up policy, or one that never fires, with 22023.
CREATE OR REPLACE FUNCTION pgqueue.schedule(
  p_name text,
  p_queue text,
  p_cron text,
  p_payload jsonb DEFAULT '{}',
  p_time_zone text DEFAULT 'UTC',
  p_catch_up text DEFAULT 'latest',
  p_priority int DEFAULT 0,
  p_max_attempts int DEFAULT 5
)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_next timestamptz;
BEGIN
  PERFORM pgqueue.require(p_name, 'name');
  PERFORM pgqueue.require_valid(octet_length(p_name) BETWEEN 1 AND 255 AND p_name !~ '[[:cntrl:]]',
                                'a schedule name is 1 to 255 bytes without control characters');
  PERFORM pgqueue.check_queue_name(p_queue);
  PERFORM pgqueue.require(p_payload, 'payload');
  PERFORM pgqueue.require(p_catch_up, 'catch_up');
  PERFORM pgqueue.require_valid(p_catch_up IN ('latest', 'skip'),
                                'catch_up must be ''latest'' or ''skip''');
  PERFORM pgqueue.require(p_priority, 'priority');
  PERFORM pgqueue.require(p_max_attempts, 'max_attempts');
  PERFORM pgqueue.require_valid(p_max_attempts >= 1, 'max_attempts must be at least 1');
  -- A name of the time zone database only: PostgreSQL also reads POSIX offsets ('+05:30',
  -- 'UTC+3'), with the sign the other way round from ISO 8601, which would fire hours off.
  IF NOT EXISTS (SELECT FROM pg_timezone_names z WHERE z.name = p_time_zone) THEN
    RAISE EXCEPTION 'pgqueue: unknown time zone "%"', p_time_zone
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'A name from pg_timezone_names, such as Europe/Berlin or UTC.';
  END IF;
  v_next := pgqueue.cron_next(p_cron, p_time_zone, now());
  IF v_next IS NULL THEN
    RAISE EXCEPTION 'pgqueue: cron expression "%" never fires', p_cron
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- One statement, so that of two sessions declaring the same new schedule at once only
  -- one is told it changed something (the other's update finds nothing to change).
  INSERT INTO pgqueue.schedules AS s (name, queue, cron, time_zone, payload, priority,
                                      max_attempts, catch_up, next_slot)
  VALUES (p_name, p_queue, p_cron, p_time_zone, p_payload, p_priority, p_max_attempts,
          p_catch_up, v_next)
  ON CONFLICT (name) DO UPDATE
    SET queue = EXCLUDED.queue, cron = EXCLUDED.cron, time_zone = EXCLUDED.time_zone,
        payload = EXCLUDED.payload, priority = EXCLUDED.priority,
        max_attempts = EXCLUDED.max_attempts, catch_up = EXCLUDED.catch_up,
        next_slot = CASE WHEN (s.cron, s.time_zone) = (EXCLUDED.cron, EXCLUDED.time_zone)
                         THEN s.next_slot ELSE EXCLUDED.next_slot END,
        updated_at = now()
    WHERE (s.queue, s.cron, s.time_zone, s.payload, s.catch_up, s.priority, s.max_attempts)
          IS DISTINCT FROM (EXCLUDED.queue, EXCLUDED.cron, EXCLUDED.time_zone, EXCLUDED.payload,
                            EXCLUDED.catch_up, EXCLUDED.priority, EXCLUDED.max_attempts);
  RETURN FOUND;
END
$$;

-- Removes a schedule (jobs it enqueued stay). False when there was none.
CREATE OR REPLACE FUNCTION pgqueue.unschedule(p_name text)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  PERFORM pgqueue.require(p_name, 'name');
  DELETE FROM pgqueue.schedules s WHERE s.name = p_name;
  RETURN FOUND;
END
$$;

-- The latest slot of a schedule at or before p_now, from p_from (a slot, at or before p_now).
-- Windows that grow from a minute to eight years find it without walking every slot missed.
CREATE OR REPLACE FUNCTION pgqueue.cron_latest(p_cron text, p_time_zone text, p_from timestamptz,
                                               p_now timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_slot timestamptz := p_from;
  v_next timestamptz;
  v_window interval;
BEGIN
  FOREACH v_window IN ARRAY ARRAY['1 minute', '1 hour', '1 day', '32 days', '367 days']::interval[]
  LOOP
    EXIT WHEN p_now - v_window <= p_from;
    v_next := pgqueue.cron_next(p_cron, p_time_zone, p_now - v_window);
    IF v_next <= p_now THEN
      v_slot := v_next;
      EXIT;
    END IF;
  END LOOP;
  LOOP
    v_next := pgqueue.cron_next(p_cron, p_time_zone, v_slot);
    EXIT WHEN v_next IS NULL OR v_next > p_now;
    v_slot := v_next;
  END LOOP;
  RETURN v_slot;
END
$$;

-- Enqueues a schedule's job for one slot; its idempotency key ('pgqueue.schedule:NAME:EPOCH')
-- keeps a slot from doubling even should it be fired twice (a schedule declared again).
CREATE OR REPLACE FUNCTION pgqueue.fire_slot(p_schedule pgqueue.schedules, p_slot timestamptz)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RETURN pgqueue.enqueue(p_schedule.queue, p_schedule.payload,
                         'pgqueue.schedule:' || p_schedule.name || ':'
                           || floor(extract(epoch FROM p_slot))::bigint,
                         p_schedule.priority, now(), p_schedule.max_attempts);
END
$$;

-- Fires the schedules that are due at p_now: one job for each slot that came within its
-- grace (twice its period plus a second, at most a minute: a late maintenance run still fires
-- every slot), and for the slots older than that, missed while nothing fired them, one job
-- for the latest (catch_up 'latest') or none ('skip'). Then moves next_slot past p_now. A
-- schedule another transaction is firing is skipped, not waited for: its row lock and
-- next_slot make each slot fire once. Claims run it with the maintenance (maintain_if_due).
-- Returns the jobs enqueued.
CREATE OR REPLACE FUNCTION pgqueue.fire_schedules(p_now timestamptz DEFAULT now())
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
  v_s pgqueue.schedules%ROWTYPE;
  v_slot timestamptz;
  v_grace interval;
  v_job bigint;
  v_last timestamptz;
  v_fired int := 0;
BEGIN
  PERFORM pgqueue.require(p_now, 'now');
  FOR v_s IN SELECT * FROM pgqueue.schedules s WHERE s.next_slot <= p_now
              ORDER BY s.next_slot FOR UPDATE SKIP LOCKED LOOP
    v_slot := v_s.next_slot;
    v_job := NULL;
    v_last := NULL;
    v_grace := least(coalesce(pgqueue.cron_next(v_s.cron, v_s.time_zone, v_slot) - v_slot,
                              interval '1 minute') * 2 + interval '1 second',
                     interval '1 minute');
    IF v_slot <= p_now - v_grace THEN
      -- Missed: collapsed into their latest, fired or not.
      v_slot := pgqueue.cron_latest(v_s.cron, v_s.time_zone, v_slot, p_now - v_grace);
      IF v_s.catch_up = 'latest' THEN
        v_job := pgqueue.fire_slot(v_s, v_slot);
        v_last := v_slot;
        v_fired := v_fired + 1;
      END IF;
      v_slot := pgqueue.cron_next(v_s.cron, v_s.time_zone, v_slot);
    END IF;
    WHILE v_slot <= p_now LOOP
      v_job := pgqueue.fire_slot(v_s, v_slot);
      v_last := v_slot;
      v_fired := v_fired + 1;
      v_slot := pgqueue.cron_next(v_s.cron, v_s.time_zone, v_slot);
    END LOOP;
    UPDATE pgqueue.schedules s
       SET next_slot = coalesce(v_slot, 'infinity'),
           last_slot = coalesce(v_last, s.last_slot),
           last_job_id = coalesce(v_job, s.last_job_id), updated_at = now()
     WHERE s.name = v_s.name;
  END LOOP;
  RETURN v_fired;
END
$$;
