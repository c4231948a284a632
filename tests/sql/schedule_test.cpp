// Periodic jobs in SQL: cron_next as a pure function (fields, names, day-of-month or
// day-of-week, time zones and daylight-saving changes, @every), refusals that store nothing,
// declaring idempotently, and fire_schedules at chosen times: each slot once, catch-up
// policies after downtime, and two sessions firing at once.
#include <catch2/catch.hpp>

#include "support/database.hpp"
#include "support/session.hpp"

namespace sql_schedule_test {

using namespace pgq_test;

namespace {

struct next_case {
  const char* cron;
  const char* zone;
  const char* after;     // a timestamptz
  const char* expected;  // UTC, as PostgreSQL prints it with timezone = UTC; "" = NULL
};

}  // namespace

TEST_CASE("cron_next finds the next slot across fields, zones and daylight-saving changes",
          "[schedule]") {
  scratch_database db;
  session s(db.dsn());
  s.query("SET timezone = 'UTC'");
  const next_case cases[] = {
      {"*/15 * * * *", "UTC", "2026-12-02 10:07:00+00", "2026-12-02 10:15:00+00"},
      {"*/15 * * * *", "UTC", "2026-12-02 10:15:00+00",
       "2026-12-02 10:30:00+00"},  // strictly after
      {"5,35 * * * *", "UTC", "2026-12-02 10:36:00+00", "2026-12-02 11:05:00+00"},
      {"0 9-17/4 * * *", "UTC", "2026-12-02 09:00:00+00", "2026-12-02 13:00:00+00"},
      {"0 9 * * MON-FRI", "Europe/Berlin", "2026-12-04 09:00:00+01", "2026-12-07 08:00:00+00"},
      {"0 0 13 * FRI", "UTC", "2026-12-01 00:00:00+00", "2026-12-04 00:00:00+00"},  // either day
      {"0 0 29 feb *", "UTC", "2026-12-01 00:00:00+00", "2028-02-29 00:00:00+00"},
      {"0 0 * * 7", "UTC", "2026-12-02 00:00:00+00", "2026-12-06 00:00:00+00"},  // 7 = Sunday
      {"@hourly", "UTC", "2026-12-02 10:00:00+00", "2026-12-02 11:00:00+00"},
      {"@daily", "America/New_York", "2026-12-02 12:00:00+00", "2026-12-03 05:00:00+00"},
      {"@weekly", "UTC", "2026-12-02 00:00:00+00", "2026-12-06 00:00:00+00"},
      {"@monthly", "UTC", "2026-12-02 00:00:00+00", "2027-01-01 00:00:00+00"},
      {"@yearly", "Asia/Tokyo", "2026-12-02 00:00:00+00", "2026-12-31 15:00:00+00"},
      {"@every 1 second", "UTC", "2026-12-02 10:00:00.5+00", "2026-12-02 10:00:01+00"},
      {"@every 90 seconds", "UTC", "2026-12-02 10:00:00+00", "2026-12-02 10:01:30+00"},
      // Clocks go forward (Berlin, 2026-03-29 02:00 -> 03:00): 02:30 does not exist. A fixed
      // hour fires at the end of the gap; with `*` hours there is nothing to fire.
      {"30 2 * * *", "Europe/Berlin", "2026-03-28 12:00:00+00", "2026-03-29 01:00:00+00"},
      {"30 * * * *", "Europe/Berlin", "2026-03-29 00:31:00+00", "2026-03-29 01:30:00+00"},
      // Clocks go back (Berlin, 2026-10-25 03:00 -> 02:00): 02:30 occurs twice. A fixed hour
      // fires at the first; with `*` hours both occurrences fire.
      {"30 2 * * *", "Europe/Berlin", "2026-10-24 12:00:00+00", "2026-10-25 00:30:00+00"},
      {"30 2 * * *", "Europe/Berlin", "2026-10-25 00:30:00+00", "2026-10-26 01:30:00+00"},
      {"30 * * * *", "Europe/Berlin", "2026-10-25 00:00:00+00", "2026-10-25 00:30:00+00"},
      {"30 * * * *", "Europe/Berlin", "2026-10-25 00:30:00+00", "2026-10-25 01:30:00+00"},
      // Half-hour shifts (Lord Howe): forward 02:00 -> 02:30 on 2026-10-04, back 02:00 ->
      // 01:30 on 2026-04-05 (01:45 occurs at 14:45 and 15:15 UTC).
      {"15 2 * * *", "Australia/Lord_Howe", "2026-10-03 12:00:00+00", "2026-10-03 15:30:00+00"},
      {"45 2 * * *", "Australia/Lord_Howe", "2026-10-03 12:00:00+00", "2026-10-03 15:45:00+00"},
      {"45 1 * * *", "Australia/Lord_Howe", "2026-04-04 12:00:00+00", "2026-04-04 14:45:00+00"},
      {"45 * * * *", "Australia/Lord_Howe", "2026-04-05 14:46:00+00", "2026-04-05 15:15:00+00"},
      {"0 0 30 2 *", "UTC", "2026-12-02 00:00:00+00", ""},  // never
  };
  for (const auto& c : cases) {
    INFO(c.cron << " in " << c.zone << " after " << c.after);
    CHECK(
        s.scalar("SELECT pgqueue.cron_next($1, $2, $3)", {c.cron, c.zone, c.after}).value_or("") ==
        c.expected);
  }
}

TEST_CASE("cron expressions read the same in a session with standard_conforming_strings off",
          "[schedule]") {
  // (There '\s+' was 's+' and '\m' was 'm': every name and every run of spaces failed.)
  scratch_database db;
  session s(db.dsn());
  s.query("SET standard_conforming_strings = off");  // before the functions are first run
  s.query("SET timezone = 'UTC'");
  CHECK(s.scalar("SELECT pgqueue.cron_next('0  9 * *  MON', 'UTC', '2026-12-02 00:00+00')") ==
        "2026-12-07 09:00:00+00");
  CHECK(s.scalar("SELECT pgqueue.schedule('weekly', 'q', '0 9 * JAN-DEC SUN')") == "t");
  CHECK(s.scalar("SELECT next_slot FROM pgqueue.schedules WHERE name = 'weekly'") != std::nullopt);
}

TEST_CASE("an invalid schedule is refused with 22023 naming the fault, and nothing is stored",
          "[schedule]") {
  scratch_database db;
  session s(db.dsn());
  const std::pair<const char*, const char*> refused[] = {
      {"* * * *", "must have five fields"},
      {"* * * * * *", "must have five fields"},
      {"60 * * * *", "cron minute: \"60\" is outside 0-59"},
      {"* 24 * * *", "cron hour: \"24\" is outside 0-23"},
      {"* * 0 * *", "cron day of month: \"0\" is outside 1-31"},
      {"* * * 13 *", "cron month: \"13\" is outside 1-12"},
      {"* * * * 8", "cron day of week: \"8\" is outside 0-7"},
      {"5-1 * * * *", "\"5-1\" is outside"},
      {"*/0 * * * *", "a step must be at least 1"},
      {"a * * * *", "\"A\" is not a value, a range or a step"},
      {"* * * FOO *", "\"FOO\" is not a value"},
      {"1,,2 * * * *", "is not a value"},
      {"0 0 30 2 *", "never fires"},
      {"@every 0 seconds", "at least 1"},
      {"@every 1.5 seconds", "whole number of seconds"},
      {"@every soon", "whole number of seconds"},
      {"@fortnightly", "must have five fields"},
  };
  for (const auto& [cron, message] : refused) {
    INFO(cron);
    const auto e = s.failure_of("SELECT pgqueue.schedule('s', 'q', $1)", {cron});
    CHECK_THAT(e, Catch::StartsWith("22023") && Catch::Contains(message));
  }
  for (const char* zone : {"Mars/Base", "+05:30", "UTC+3"}) {  // offsets PostgreSQL reads as POSIX
    INFO(zone);
    CHECK_THAT(s.failure_of("SELECT pgqueue.schedule('s', 'q', '* * * * *', '{}', $1)", {zone}),
               Catch::StartsWith("22023") && Catch::Contains("unknown time zone"));
  }
  CHECK_THAT(s.failure_of("SELECT pgqueue.schedule('s', 'q', '* * * * *', '{}', 'UTC', 'all')"),
             Catch::StartsWith("22023") && Catch::Contains("catch_up"));
  CHECK_THAT(s.failure_of("SELECT pgqueue.schedule('s', '', '* * * * *')"),
             Catch::StartsWith("22023") && Catch::Contains("invalid queue name"));
  CHECK_THAT(s.failure_of("SELECT pgqueue.schedule('s', 'q', '* * * * *', '{nope')"),
             Catch::StartsWith("22P02"));
  CHECK(s.integer("SELECT count(*) FROM pgqueue.schedules") == 0);
}

TEST_CASE("declaring a schedule again changes nothing; a change keeps or moves its next slot",
          "[schedule]") {
  scratch_database db;
  session s(db.dsn());
  CHECK(*s.scalar("SELECT pgqueue.schedule('r', 'reports', '0 * * * *')") == "t");
  const auto row =
      "SELECT concat_ws(' ', queue, cron, payload, next_slot, updated_at) "
      "FROM pgqueue.schedules";
  const auto first = *s.scalar(row);
  CHECK(*s.scalar("SELECT pgqueue.schedule('r', 'reports', '0 * * * *')") == "f");
  CHECK(*s.scalar(row) == first);
  // A new payload keeps the slot; a new expression computes it again.
  CHECK(*s.scalar("SELECT pgqueue.schedule('r', 'reports', '0 * * * *', '{\"v\":2}')") == "t");
  CHECK(*s.scalar("SELECT next_slot = date_trunc('hour', now()) + interval '1 hour' "
                  "FROM pgqueue.schedules") == "t");
  CHECK(*s.scalar("SELECT pgqueue.schedule('r', 'reports', '@every 1 second')") == "t");
  CHECK(*s.scalar("SELECT next_slot <= now() + interval '1 second' FROM pgqueue.schedules") == "t");
  CHECK(*s.scalar("SELECT pgqueue.unschedule('r')") == "t");
  CHECK(*s.scalar("SELECT pgqueue.unschedule('r')") == "f");
}

TEST_CASE("fire_schedules fires each recent slot once and collapses missed ones by policy",
          "[schedule]") {
  scratch_database db;
  session s(db.dsn());
  s.query("SELECT pgqueue.schedule('tick', 'q', '@every 1 second')");
  s.query("SELECT pgqueue.schedule('tock', 'q', '@every 1 second', '{\"k\":1}', 'UTC', 'skip')");
  // Nothing fired them for ten seconds: slots T-10 .. T are due at T. The grace of a 1-second
  // schedule is 3 s: T-2 .. T are recent (fired), T-10 .. T-3 missed.
  s.query("CREATE TEMP TABLE t AS SELECT date_trunc('second', now()) + interval '1 hour' AS t");
  s.query("UPDATE pgqueue.schedules SET next_slot = (SELECT t FROM t) - interval '10 seconds'");
  CHECK(s.integer("SELECT pgqueue.fire_schedules((SELECT t FROM t))") == 7);
  const auto slots = [&](const std::string& name) {
    return *s.scalar(
        "SELECT string_agg((split_part(idempotency_key, ':', 3)::bigint "
        "  - extract(epoch FROM (SELECT t FROM t))::bigint)::text, ',' ORDER BY id) "
        "FROM pgqueue.jobs WHERE idempotency_key LIKE $1",
        {"pgqueue.schedule:" + name + ":%"});
  };
  CHECK(slots("tick") == "-3,-2,-1,0");  // the latest missed, then the recent ones
  CHECK(slots("tock") == "-2,-1,0");     // the recent ones only
  CHECK(*s.scalar("SELECT payload::text FROM pgqueue.jobs WHERE idempotency_key LIKE "
                  "'pgqueue.schedule:tock:%' LIMIT 1") == "{\"k\": 1}");
  // Firing again at the same time, or a second later, adds only the new slot.
  CHECK(s.integer("SELECT pgqueue.fire_schedules((SELECT t FROM t))") == 0);
  CHECK(s.integer("SELECT pgqueue.fire_schedules((SELECT t FROM t) + interval '1 second')") == 2);
  CHECK(*s.scalar("SELECT string_agg(name || ' ' || (next_slot - (SELECT t FROM t))::text "
                  "|| ' ' || (last_slot - (SELECT t FROM t))::text, '; ' ORDER BY name) "
                  "FROM pgqueue.schedules") == "tick 00:00:02 00:00:01; tock 00:00:02 00:00:01");
}

TEST_CASE("two sessions firing at once fire each slot once", "[schedule]") {
  scratch_database db;
  session a(db.dsn()), b(db.dsn());
  a.query("SELECT pgqueue.schedule('tick', 'q', '@every 1 second')");
  // One instant for both sessions: each one's now() would cross a second boundary apart.
  const std::string t = *a.scalar("SELECT date_trunc('second', now())::text");
  a.query("UPDATE pgqueue.schedules SET next_slot = $1::timestamptz", {t});
  const std::string fire = "SELECT pgqueue.fire_schedules($1::timestamptz + interval '1 second')";
  // a holds the schedule's row (fired, not committed); b skips it instead of waiting.
  a.query("BEGIN");
  CHECK(a.integer(fire, {t}) == 2);
  CHECK(b.integer(fire, {t}) == 0);
  a.query("COMMIT");
  CHECK(b.integer(fire, {t}) == 0);
  CHECK(b.integer("SELECT count(*) FROM pgqueue.jobs") == 2);
}

}  // namespace sql_schedule_test
