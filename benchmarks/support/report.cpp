// Writing a run's results: the text table (stdout) and the JSON file (--json).
#include "report.hpp"

#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace bench {
namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Three significant-ish digits for milliseconds: 0.412, 3.41, 12.3, 140.
std::string ms(double v) {
  return fixed(v, v < 1 ? 3 : v < 10 ? 2 : v < 100 ? 1 : 0);
}

std::string ratio_text(double r) {
  return fixed(r, r < 10 ? 2 : 1) + "x";
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  std::ostringstream o;
  o.precision(10);
  o << v;
  return o.str();
}

}  // namespace

const row* report::find(const std::string& id) const {
  for (const auto& r : rows_) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

std::optional<double> report::ratio(const std::string& id, const std::string& ref) const {
  const row* a = find(id);
  const row* b = find(ref);
  if (!a || !b) return std::nullopt;
  if (!a->rate && !b->rate && a->lat && b->lat && b->lat->p50 > 0) return a->lat->p50 / b->lat->p50;
  if (!a->rate || !b->rate || *b->rate <= 0) return std::nullopt;
  return *a->rate / *b->rate;
}

verdict report::evaluate(const target& t) const {
  verdict v;
  if (!t.ref.empty()) {
    v.measured = ratio(t.row, t.ref);
    v.met = v.measured && *v.measured >= t.bound;
    return v;
  }
  const row* r = find(t.row);
  if (!r) return v;
  if (r->lat && t.figure == "p50") v.measured = r->lat->p50;
  if (r->lat && t.figure == "p99") v.measured = r->lat->p99;
  for (const auto& [name, value] : r->extra) {
    if (name == t.figure) v.measured = value;
  }
  v.met = v.measured && *v.measured <= t.bound;
  return v;
}

void report::print_table(std::FILE* out) const {
  std::fprintf(out, "pgqueue-bench:");
  for (const auto& [k, v] : meta_) std::fprintf(out, " %s=%s", k.c_str(), v.c_str());
  std::fprintf(out, "\n\n%-9s %-56s %9s %8s %8s %8s %8s  %s\n", "scenario", "case", "jobs/s",
               "p50 ms", "p90 ms", "p99 ms", "max ms", "vs reference; other");
  std::string last;
  for (const auto& r : rows_) {
    if (!last.empty() && r.scenario != last) std::fprintf(out, "\n");
    last = r.scenario;
    std::string label = r.tag.empty() ? r.label : r.tag + " " + r.label;
    std::string tail;
    auto append = [&](const std::string& s) { tail += (tail.empty() ? "" : ", ") + s; };
    for (const auto& ref : r.refs) {
      if (auto x = ratio(r.id, ref)) {
        const row* rr = find(ref);
        append((r.rate ? "" : "p50 ") + ratio_text(*x) + " " +
               (rr->tag.empty() ? rr->id : rr->tag));
      }
    }
    for (const auto& [name, value] : r.extra) append(name + "=" + ms(value));
    if (!r.note.empty()) append("[" + r.note + "]");
    std::fprintf(out, "%-9s %-56s %9s %8s %8s %8s %8s  %s\n", r.scenario.c_str(), label.c_str(),
                 r.rate ? fixed(*r.rate, 0).c_str() : "-", r.lat ? ms(r.lat->p50).c_str() : "-",
                 r.lat ? ms(r.lat->p90).c_str() : "-", r.lat ? ms(r.lat->p99).c_str() : "-",
                 r.lat ? ms(r.lat->max).c_str() : "-", tail.c_str());
  }
  if (targets_.empty()) return;
  std::fprintf(out, "\ntargets (measured, not asserted):\n");
  for (const auto& t : targets_) {
    auto v = evaluate(t);
    // A figure named "..._vs_..." is a ratio, one named "..._us/..." microseconds; the others
    // are milliseconds.
    const bool ratio_figure = t.figure.find("_vs_") != std::string::npos;
    const bool us_figure = t.figure.find("_us/") != std::string::npos;
    std::string measured = !v.measured                      ? "not measured"
                           : !t.ref.empty() || ratio_figure ? ratio_text(*v.measured)
                           : us_figure                      ? ms(*v.measured) + " us"
                                                            : ms(*v.measured) + " ms";
    std::fprintf(out, "  %-7s %-66s %s\n",
                 !v.measured ? "-"
                 : v.met     ? "met"
                             : "MISSED",
                 t.text.c_str(), measured.c_str());
  }
}

void report::write_json(const std::string& path) const {
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot write " + path);
  f << "{\n  \"meta\": {";
  for (std::size_t i = 0; i < meta_.size(); ++i) {
    f << (i ? ", " : "") << json_string(meta_[i].first) << ": " << json_string(meta_[i].second);
  }
  f << "},\n  \"rows\": [";
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    const row& r = rows_[i];
    f << (i ? ",\n" : "\n") << "    {\"id\": " << json_string(r.id)
      << ", \"scenario\": " << json_string(r.scenario) << ", \"label\": " << json_string(r.label)
      << ", \"jobs_per_s\": " << (r.rate ? json_number(*r.rate) : "null");
    if (r.lat) {
      f << ", \"latency_ms\": {\"samples\": " << r.lat->samples
        << ", \"p50\": " << json_number(r.lat->p50) << ", \"p90\": " << json_number(r.lat->p90)
        << ", \"p99\": " << json_number(r.lat->p99) << ", \"max\": " << json_number(r.lat->max)
        << "}";
    }
    f << ", \"extra\": {";
    for (std::size_t k = 0; k < r.extra.size(); ++k) {
      f << (k ? ", " : "") << json_string(r.extra[k].first) << ": "
        << json_number(r.extra[k].second);
    }
    f << "}, \"ratios\": {";
    bool first = true;
    for (const auto& ref : r.refs) {
      if (auto x = ratio(r.id, ref)) {
        f << (first ? "" : ", ") << json_string(ref) << ": " << json_number(*x);
        first = false;
      }
    }
    f << "}, \"note\": " << json_string(r.note) << "}";
  }
  f << "\n  ],\n  \"targets\": [";
  for (std::size_t i = 0; i < targets_.size(); ++i) {
    auto v = evaluate(targets_[i]);
    f << (i ? ",\n" : "\n") << "    {\"target\": " << json_string(targets_[i].text)
      << ", \"measured\": " << (v.measured ? json_number(*v.measured) : "null")
      << ", \"met\": " << (v.met ? "true" : "false") << "}";
  }
  f << "\n  ]\n}\n";
}

}  // namespace bench
