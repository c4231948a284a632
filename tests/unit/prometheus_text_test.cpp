// The Prometheus text writer: label values escaped, numbers as the format spells them, and
// cumulative histogram buckets.
#include <limits>

#include <catch2/catch.hpp>
#include <pgqueue/detail/prometheus_text.hpp>

namespace unit_prometheus_text_test {

namespace p = pgqueue::detail::prometheus;

TEST_CASE("label values escape backslash, quote and line feed, nothing else", "[prometheus]") {
  std::string l;
  p::append_label(l, "queue", "a\\b\"c\nd<e>é");
  CHECK(l == "queue=\"a\\\\b\\\"c\\nd<e>é\"");
}

TEST_CASE("numbers: shortest text, and the format's names for infinities and NaN", "[prometheus]") {
  std::string out;
  p::append_sample(out, "m", "", 0.1);
  p::append_sample(out, "m", "", std::numeric_limits<double>::infinity());
  p::append_sample(out, "m", "", -std::numeric_limits<double>::infinity());
  p::append_sample(out, "m", "", std::numeric_limits<double>::quiet_NaN());
  p::append_sample(out, "m", "a=\"b\"", std::int64_t{-3});
  CHECK(out == "m 0.1\nm +Inf\nm -Inf\nm NaN\nm{a=\"b\"} -3\n");
}

TEST_CASE("a histogram's buckets are cumulative, a value on a bound counts in it", "[prometheus]") {
  const std::vector<double> bounds{0.5, 1, 2.5};
  p::histogram h(&bounds);
  for (double v : {0.1, 0.5, 0.7, 3.0}) h.observe(v);
  std::string out;
  h.append(out, "t", "q=\"x\"");
  CHECK(out ==
        "t_bucket{q=\"x\",le=\"0.5\"} 2\n"
        "t_bucket{q=\"x\",le=\"1\"} 3\n"
        "t_bucket{q=\"x\",le=\"2.5\"} 3\n"
        "t_bucket{q=\"x\",le=\"+Inf\"} 4\n"
        "t_sum{q=\"x\"} 4.3\n"
        "t_count{q=\"x\"} 4\n");
}

}  // namespace unit_prometheus_text_test
