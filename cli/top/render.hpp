// How `pgqueue top` prints a frame: lines of text (a header, then a table, queue names made
// printable) or one line of JSON (NDJSON: one object per frame, for scripts).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "frame.hpp"

namespace pgqueue_cli::top_view {

/// The frame as lines without their newlines: a header (time, database, totals and rates),
/// then the column names, then one row per queue. Queue names longer than `name_cap` (when
/// given) are cut there and end in '~', so that a long one does not push every count off a
/// narrow screen.
std::vector<std::string> text_lines(const frame& f, std::optional<std::size_t> name_cap = {});

/// The frame as one JSON object on one line (no newline): time, database, seconds between the
/// readings (null on the first frame), totals, and per queue its fields as read, the totals'
/// growth since the reading before (`*_delta`) and the rates (`*_per_s`; null on the first).
std::string json_line(const frame& f);

/// `line` cut to `columns` terminal columns (a UTF-8 character counts as one column).
std::string fit(const std::string& line, std::size_t columns);

/// Seconds as people read an age: "4.2s", "3m07s", "2h05m", "3d04h"; "-" for none.
std::string age_text(std::optional<double> seconds);

}  // namespace pgqueue_cli::top_view
