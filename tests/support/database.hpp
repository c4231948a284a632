// The test server and scratch databases, without Asio: the SQL suites include only this.
#pragma once

#include <string>

namespace pgq_test {

// The server every test talks to: `PGQUEUE_TEST_DSN` when set, otherwise a throwaway cluster
// (initdb into a temp directory, unix socket only) started on first use and removed at exit.
const std::string& server_dsn();

// Path of sql/pgqueue.sql in the source tree (the schema under test).
const std::string& schema_file();

// Reads a whole file; throws std::runtime_error when it cannot.
std::string read_file(const std::string& path);

// A fresh database on the test server, dropped (with its connections) in the destructor, so
// each test starts clean and leaves nothing behind. With `install_schema` the current
// sql/pgqueue.sql is installed (copied from a per-process template, so it is cheap).
class scratch_database {
 public:
  explicit scratch_database(bool install_schema = true);
  ~scratch_database();
  scratch_database(const scratch_database&) = delete;
  scratch_database& operator=(const scratch_database&) = delete;

  const std::string& name() const { return name_; }
  // A conninfo string for this database.
  const std::string& dsn() const { return dsn_; }

 private:
  std::string name_;
  std::string dsn_;
};

}  // namespace pgq_test
