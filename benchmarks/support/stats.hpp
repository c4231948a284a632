// Latency samples summarised as percentiles (nearest rank), in milliseconds.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace bench {

struct latency {
  std::size_t samples = 0;
  double p50 = 0, p90 = 0, p99 = 0, max = 0;  // milliseconds
};

/// p50/p90/p99/max of `ms` (nearest-rank percentiles); all zero when there are no samples.
inline latency summarize(std::vector<double> ms) {
  latency out;
  out.samples = ms.size();
  if (ms.empty()) return out;
  std::sort(ms.begin(), ms.end());
  auto at = [&](double p) {
    auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(ms.size())));
    return ms[std::clamp<std::size_t>(rank, 1, ms.size()) - 1];
  };
  out.p50 = at(0.50);
  out.p90 = at(0.90);
  out.p99 = at(0.99);
  out.max = ms.back();
  return out;
}

}  // namespace bench
