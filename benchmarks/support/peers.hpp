// The peers: graphile-worker and pg-boss, measured on the same server by
// benchmarks/peers/run.mjs (installed outside the repository by benchmarks/peers/install) when
// pgqueue-bench is given --peers NODE. Each peer run gets a database of its own.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "context.hpp"

namespace bench {

/// What one run of run.mjs printed: its `result` line and (pinned) its `window` lines, each
/// as key=value pairs.
struct peer_output {
  std::map<std::string, std::string> result;
  std::vector<std::map<std::string, std::string>> windows;
};

/// The peers compared with, in the order they run.
const std::vector<std::string>& peer_names();

/// Runs `scenario` of `peer` (run.mjs --scenario; `args` are more of its options) in a fresh
/// database, dropped afterwards. Throws with the script's output when it fails.
peer_output run_peer(const options& opt, const std::string& peer, const std::string& scenario,
                     const std::vector<std::string>& args);

/// Runs `scenario` for every peer and adds their rows (scenario column `shown_as`) to the
/// report; a peer that fails gets a row saying so and the others still run. Does nothing
/// without --peers.
void add_peer_rows(context& ctx, const std::string& scenario, const std::string& shown_as);

/// Gives every pgqueue row that has a peer counterpart a ratio to the best peer's row (the
/// highest rate, or for latency rows the lowest p50), and returns the id of the best peer's
/// batched drain (empty without peers), for the targets.
std::string compare_with_peers(report& rep);

}  // namespace bench
