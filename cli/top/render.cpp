#include "render.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

#include <nlohmann/json.hpp>

#include "../output.hpp"

namespace pgqueue_cli::top_view {

namespace {

std::string format(const char* spec, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, spec, x);
  return buf;
}

std::string rate_text(std::optional<double> r) {
  return r ? format("%.1f", *r) : "-";
}

// The time of `t` as `spec` (strftime) in local time, or in UTC with `utc`.
std::string time_text(std::chrono::system_clock::time_point t, const char* spec, bool utc) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm parts{};
  if (utc) {
    gmtime_r(&secs, &parts);
  } else {
    localtime_r(&secs, &parts);
  }
  char buf[64];
  std::strftime(buf, sizeof buf, spec, &parts);
  return buf;
}

nlohmann::json optional_json(std::optional<double> x) {
  return x ? nlohmann::json(*x) : nlohmann::json(nullptr);
}

nlohmann::json optional_json(std::optional<std::int64_t> x) {
  return x ? nlohmann::json(*x) : nlohmann::json(nullptr);
}

// The fields a queue and the totals share in JSON.
nlohmann::json counts_json(const pgqueue::queue_status& s, const growth& g, const frame& f) {
  return {{"ready", s.ready},
          {"scheduled", s.scheduled},
          {"claimed", s.claimed},
          {"dead", s.dead},
          {"cancelled", s.cancelled},
          {"done", s.done},
          {"waiting", s.waiting},
          {"oldest_ready_age_s", optional_json(s.oldest_ready_age_s)},
          {"lag_s", optional_json(s.lag_s)},
          {"enqueued_total", s.enqueued_total},
          {"done_total", s.done_total},
          {"failed_total", s.failed_total},
          {"enqueued_delta", optional_json(g.enqueued)},
          {"done_delta", optional_json(g.done)},
          {"failed_delta", optional_json(g.failed)},
          {"enqueued_per_s", optional_json(per_second(g.enqueued, f))},
          {"done_per_s", optional_json(per_second(g.done, f))},
          {"failed_per_s", optional_json(per_second(g.failed, f))}};
}

}  // namespace

std::string age_text(std::optional<double> seconds) {
  if (!seconds) return "-";
  const double s = std::max(0.0, *seconds);
  if (s < 60) return format("%.1fs", s);
  const auto whole = static_cast<long long>(s);
  char buf[64];
  if (whole < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", whole / 60, whole % 60);
  } else if (whole < 86400) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", whole / 3600, whole % 3600 / 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", whole / 86400, whole % 86400 / 3600);
  }
  return buf;
}

std::string fit(const std::string& line, std::size_t columns) {
  std::size_t seen = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if ((line[i] & 0xc0) == 0x80) continue;  // a UTF-8 continuation byte: same column
    if (seen++ == columns) return line.substr(0, i);
  }
  return line;
}

std::vector<std::string> text_lines(const frame& f, std::optional<std::size_t> name_cap) {
  const auto& t = f.totals;
  std::vector<std::string> lines;
  lines.push_back("pgqueue top  " + time_text(f.at, "%Y-%m-%d %H:%M:%S", false) + "  database " +
                  printable(f.database) + "  " + std::to_string(f.rows.size()) +
                  (f.rows.size() == 1 ? " queue" : " queues"));
  lines.push_back("jobs: " + std::to_string(t.ready) + " ready, " + std::to_string(t.scheduled) +
                  " scheduled, " + std::to_string(t.claimed) + " claimed, " +
                  std::to_string(t.dead) + " dead, " + std::to_string(t.done) + " done, " +
                  std::to_string(t.waiting) +
                  " waiting; per second: " + rate_text(per_second(f.total_delta.enqueued, f)) +
                  " enqueued, " + rate_text(per_second(f.total_delta.done, f)) + " done, " +
                  rate_text(per_second(f.total_delta.failed, f)) + " failed");

  const std::vector<std::string> head{"queue",      "ready",   "scheduled", "claimed", "dead",
                                      "done",       "waiting", "paused",    "oldest",  "lag",
                                      "enqueued/s", "done/s",  "failed/s"};
  std::vector<std::vector<std::string>> cells;
  for (const auto& r : f.rows) {
    const auto& s = r.status;
    std::string name = printable(s.queue);
    if (name_cap && columns_of(name) > *name_cap) name = fit(name, *name_cap - 1) + "~";
    cells.push_back(
        {name, std::to_string(s.ready), std::to_string(s.scheduled), std::to_string(s.claimed),
         std::to_string(s.dead), std::to_string(s.done), std::to_string(s.waiting),
         s.paused ? "yes" : "no", age_text(s.oldest_ready_age_s), age_text(s.lag_s),
         rate_text(per_second(r.delta.enqueued, f)), rate_text(per_second(r.delta.done, f)),
         rate_text(per_second(r.delta.failed, f))});
  }
  std::vector<std::size_t> width;
  for (const auto& h : head) width.push_back(h.size());
  for (const auto& row : cells) {
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], columns_of(row[c]));
  }
  // The name and "paused" left-aligned, numbers right-aligned, two spaces between columns.
  auto line_of = [&](const std::vector<std::string>& row) {
    std::string out;
    for (std::size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - columns_of(row[c]), ' ');
      const bool left = c == 0 || c == 7;
      if (c > 0) out += "  ";
      out += left ? row[c] + (c + 1 < row.size() ? pad : "") : pad + row[c];
    }
    return out;
  };
  lines.push_back(line_of(head));
  for (const auto& row : cells) lines.push_back(line_of(row));
  return lines;
}

std::string json_line(const frame& f) {
  nlohmann::json out{
      {"time", time_text(f.at, "%Y-%m-%dT%H:%M:%SZ", true)},
      {"database", f.database},
      {"seconds", optional_json(f.seconds)},
      {"totals", counts_json(f.totals, f.total_delta, f)},
  };
  auto queues = nlohmann::json::array();
  for (const auto& r : f.rows) {
    auto q = counts_json(r.status, r.delta, f);
    q["queue"] = r.status.queue;
    q["paused"] = r.status.paused;
    queues.push_back(std::move(q));
  }
  out["queues"] = std::move(queues);
  // A queue name need not be valid UTF-8 (the server's encoding may be another): replace, do
  // not throw.
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace pgqueue_cli::top_view
