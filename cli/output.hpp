// How the pgqueue tool prints a result: an aligned text table for people, or with --json an
// array of objects (one per row; SQL NULL as null, numbers and booleans as JSON values) for
// scripts.
#pragma once

#include <iosfwd>
#include <string>

#include <pgqueue/pg/result.hpp>

namespace pgqueue_cli {

/// `text` safe for a terminal: control characters (ESC, CR, newlines, ...) written as escapes
/// (`\n`, `\x1b`), so a job's error or a worker's id cannot move the cursor, clear the
/// screen or fake a line. --json output needs none of this (JSON escapes them).
std::string printable(std::string_view text);

/// How many columns `text` takes on a terminal, counted as UTF-8 characters (not bytes), so
/// a queue named café lines up with the others (wide characters such as emoji take two; not
/// counted).
std::size_t columns_of(std::string_view text);

/// Writes `r` as a table (column names, then rows; NULL as "-") or, when `json`, as a JSON
/// array of objects keyed by column name: text as strings, columns named (comma-separated)
/// in `as_json` as the JSON their text is (numbers, json and jsonb columns), those in
/// `boolean` as true/false.
void print(std::ostream& out, const pgqueue::pg::result& r, bool json,
           const std::string& as_json = "", const std::string& boolean = "");

}  // namespace pgqueue_cli
