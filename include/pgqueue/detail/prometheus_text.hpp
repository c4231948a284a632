// Writing Prometheus' text exposition format (version 0.0.4): families, samples, label values
// escaped, histograms. Only what pgqueue's metrics need.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pgqueue::detail::prometheus {

/// A float as the format wants it: shortest round-trip text, or NaN, +Inf, -Inf.
inline void append_number(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
  }
}

inline void append_number(std::string& out, std::uint64_t v) {
  out += std::to_string(v);
}
inline void append_number(std::string& out, std::int64_t v) {
  out += std::to_string(v);
}

/// `name="value"` with the value escaped (backslash, double quote, line feed), so a queue
/// named with quotes or newlines cannot break the exposition.
inline void append_label(std::string& out, std::string_view name, std::string_view value) {
  out += name;
  out += "=\"";
  for (const char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  out += '"';
}

/// The `# HELP` and `# TYPE` lines that open a family (help text has no line feeds).
inline void append_family(std::string& out, std::string_view name, std::string_view type,
                          std::string_view help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

/// One sample: `name{labels} value`. `labels` is what append_label wrote (comma-separated), or
/// empty.
template <class Number>
void append_sample(std::string& out, std::string_view name, std::string_view labels, Number v) {
  out += name;
  if (!labels.empty()) {
    out += '{';
    out += labels;
    out += '}';
  }
  out += ' ';
  append_number(out, v);
  out += '\n';
}

/// A cumulative histogram over fixed upper bounds (ascending), in seconds.
class histogram {
 public:
  explicit histogram(const std::vector<double>* bounds)
      : bounds_(bounds), counts_(bounds->size() + 1, 0) {}

  void observe(double v) {
    const auto at = std::lower_bound(bounds_->begin(), bounds_->end(), v) - bounds_->begin();
    ++counts_[static_cast<std::size_t>(at)];  // the first bucket whose bound is >= v
    sum_ += v;
    ++count_;
  }

  /// `name_bucket{labels,le="..."}` for every bound and +Inf, then `name_sum` and `name_count`.
  void append(std::string& out, std::string_view name, std::string_view labels) const {
    std::uint64_t cumulative = 0;
    const std::string bucket = std::string(name) + "_bucket";
    for (std::size_t i = 0; i <= bounds_->size(); ++i) {
      cumulative += counts_[i];
      std::string l(labels);
      if (!l.empty()) l += ',';
      l += "le=\"";
      if (i < bounds_->size()) {
        append_number(l, (*bounds_)[i]);
      } else {
        l += "+Inf";
      }
      l += '"';
      append_sample(out, bucket, l, cumulative);
    }
    append_sample(out, std::string(name) + "_sum", labels, sum_);
    append_sample(out, std::string(name) + "_count", labels, count_);
  }

 private:
  const std::vector<double>* bounds_;
  std::vector<std::uint64_t> counts_;  // per bucket, not cumulative; the last is above all bounds
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

}  // namespace pgqueue::detail::prometheus
