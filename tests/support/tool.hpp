// Running the pgqueue command (cli/) on a scratch database, as a user would: through
// PGQUEUE_DSN. For the suites that define PGQUEUE_TOOL, the command's path (tests/cli).
#pragma once

#include <string>
#include <vector>

#include "support/command.hpp"
#include "support/server.hpp"

#ifndef PGQUEUE_TOOL
#error "PGQUEUE_TOOL must name the pgqueue command (tests/cli/meson.build defines it)"
#endif

namespace pgq_test {

// What the tool needs in its environment to use `db`.
inline std::vector<std::string> tool_environment(const scratch_database& db) {
  return {"PGQUEUE_DSN=" + db.dsn()};
}

// Runs the tool with `args` on database `db`, `input` on its stdin.
inline command_result tool(const scratch_database& db, std::vector<std::string> args,
                           const std::string& input = "") {
  args.insert(args.begin(), PGQUEUE_TOOL);
  return run_command(args, input, tool_environment(db));
}

}  // namespace pgq_test
