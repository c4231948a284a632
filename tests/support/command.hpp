// Runs a program to its end with the given stdin and returns its exit code and output: for
// tests of command-line tools. Bounded: a program still running after `limit` is killed and
// the result says so.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace pgq_test {

struct command_result {
  int exit_code = -1;  // -1: killed (signal or `limit`)
  std::string out, err;
};

// Runs argv[0] (a path) with argv, `env` added to this process's environment ("NAME=value";
// a name given replaces the inherited one), and `input` on its stdin (then closed).
command_result run_command(const std::vector<std::string>& argv, const std::string& input = "",
                           const std::vector<std::string>& env = {},
                           std::chrono::seconds limit = std::chrono::seconds(60));

// This process's environment with `extra` laid over it ("NAME=value" replaces NAME).
std::vector<std::string> environment_with(const std::vector<std::string>& extra);

}  // namespace pgq_test
