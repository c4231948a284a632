// One screenful of `pgqueue top`: the queues as one reading of pgqueue.queue_summary() found
// them, with the rates since the reading before (differences of the totals that only grow,
// divided by the time between the two readings). No I/O: the command reads, render.hpp prints.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <pgqueue/queue_status.hpp>

namespace pgqueue_cli::top_view {

/// How much a total grew since the reading before. None on the first frame, and when a total
/// went down (jobs deleted behind gc's back): no rate is better than a wrong or negative one.
struct growth {
  std::optional<std::int64_t> enqueued, done, failed;
};

struct queue_row {
  pgqueue::queue_status status;
  growth delta;
};

struct frame {
  std::chrono::system_clock::time_point at;  ///< when the reading returned (this machine's clock)
  std::string database;                      ///< what the header names
  std::optional<double> seconds;  ///< between this reading and the one before; none on the first
  std::vector<queue_row> rows;    ///< in display order (order_rows)
  pgqueue::queue_status totals;   ///< every queue summed (queue name empty; ages are the maxima)
  growth total_delta;             ///< summed over the queues whose delta is known
};

/// Builds the frame for reading `now`, taken `seconds` after `before` (none: the first
/// reading). A queue missing from `before` is new: its totals grew from zero.
frame make_frame(std::vector<pgqueue::queue_status> now,
                 const std::vector<pgqueue::queue_status>* before, std::optional<double> seconds,
                 std::string database);

/// `delta` per second of `f`, when both are known.
std::optional<double> per_second(std::optional<std::int64_t> delta, const frame& f);

/// Sorts the rows most urgent first: the longest lag, then the most ready jobs, then by name
/// (a queue with nothing due has no lag and sorts after every queue that has).
void order_rows(std::vector<queue_row>& rows);

}  // namespace pgqueue_cli::top_view
