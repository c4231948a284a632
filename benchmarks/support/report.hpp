// The results of a run: one row per measured case, the targets they are judged by, and the two
// ways they are written out (a text table and JSON).
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "stats.hpp"

namespace bench {

/// One measured case. `refs` name the rows (usually references) its rate is compared with.
struct row {
  row() = default;
  row(std::string id_, std::string scenario_, std::string label_)
      : id(std::move(id_)), scenario(std::move(scenario_)), label(std::move(label_)) {}

  std::string id;              ///< stable key, e.g. "drain.c64.batched" (JSON, ratios, targets)
  std::string scenario;        ///< enqueue, drain, latency, scale, reference, memory
  std::string label;           ///< what was measured, for people
  std::string tag;             ///< short name when others refer to it, e.g. "(a)"; default: id
  std::optional<double> rate;  ///< jobs per second
  std::optional<latency> lat;  ///< milliseconds
  std::vector<std::pair<std::string, double>> extra;  ///< other figures; the name has the unit
  std::vector<std::string> refs;
  std::string note;  ///< e.g. "queue ran dry"
};

/// A goal from the issue: a ratio of two rates, or a figure with an upper bound.
struct target {
  std::string text;
  std::string row;     ///< the measured row
  std::string ref;     ///< ratio target: rate(row) / rate(ref) >= bound
  std::string figure;  ///< bound target: "p50", "p99" or an extra's name; value <= bound
  double bound = 0;
};

/// What the target evaluated to (nullopt measured: a row was missing).
struct verdict {
  std::optional<double> measured;
  bool met = false;
};

class report {
 public:
  void add(row r) { rows_.push_back(std::move(r)); }
  /// Adds `ref` to the refs of every row whose id starts with `prefix`.
  void add_ref_by_prefix(const std::string& prefix, const std::string& ref) {
    for (auto& r : rows_) {
      if (r.id.rfind(prefix, 0) == 0) r.refs.push_back(ref);
    }
  }
  void add_target(target t) { targets_.push_back(std::move(t)); }
  void set_header(std::vector<std::pair<std::string, std::string>> meta) {
    meta_ = std::move(meta);
  }

  const row* find(const std::string& id) const;
  /// rate(id) / rate(ref); for two latency rows, p50(id) / p50(ref) (lower is better).
  std::optional<double> ratio(const std::string& id, const std::string& ref) const;
  verdict evaluate(const target& t) const;

  void print_table(std::FILE* out) const;
  void write_json(const std::string& path) const;

 private:
  std::vector<std::pair<std::string, std::string>> meta_;
  std::vector<row> rows_;
  std::vector<target> targets_;
};

}  // namespace bench
