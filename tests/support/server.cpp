#include "support/database.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "support/cluster.hpp"
#include "support/session.hpp"

namespace pgq_test {
namespace {

std::string replace_dbname(const std::string& dsn, const std::string& db) {
  // In a key=value conninfo a later keyword wins, so appending is enough; a URI gets its path
  // (the database) replaced and keeps its query parameters.
  auto scheme = dsn.find("://");
  if (scheme == std::string::npos) return dsn + " dbname=" + db;
  auto query = dsn.find('?');
  auto path = dsn.find('/', scheme + 3);
  std::string base = dsn.substr(0, std::min(path, query));
  return base + "/" + db + (query == std::string::npos ? "" : dsn.substr(query));
}

std::mutex template_mutex;
std::string template_name;  // per-process database holding the installed schema

void drop_template() {
  if (template_name.empty()) return;
  try {
    session admin(server_dsn());
    admin.query("DROP DATABASE IF EXISTS \"" + template_name + "\" WITH (FORCE)");
  } catch (...) {
  }
}

const std::string& schema_template() {
  std::lock_guard lock(template_mutex);
  if (template_name.empty()) {
    std::string name = "pgq_tpl_" + std::to_string(::getpid());
    session admin(server_dsn());
    admin.query("DROP DATABASE IF EXISTS \"" + name + "\"");
    admin.query("CREATE DATABASE \"" + name + "\"");
    {
      session s(replace_dbname(server_dsn(), name));
      s.script(read_file(schema_file()));
    }
    template_name = name;
    std::atexit(drop_template);
  }
  return template_name;
}

}  // namespace

const std::string& server_dsn() {
  static const std::string dsn = [] {
    if (const char* env = std::getenv("PGQUEUE_TEST_DSN"); env && *env) return std::string(env);
    return throwaway_cluster::shared().dsn();
  }();
  return dsn;
}

const std::string& schema_file() {
  static const std::string path = PGQUEUE_SOURCE_ROOT "/sql/pgqueue.sql";
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

scratch_database::scratch_database(bool install_schema) {
  static std::atomic<int> counter{0};
  name_ = "pgq_t_" + std::to_string(::getpid()) + "_" + std::to_string(++counter);
  session admin(server_dsn());
  admin.query("DROP DATABASE IF EXISTS \"" + name_ + "\"");
  if (install_schema)
    admin.query("CREATE DATABASE \"" + name_ + "\" TEMPLATE \"" + schema_template() + "\"");
  else
    admin.query("CREATE DATABASE \"" + name_ + "\"");
  dsn_ = replace_dbname(server_dsn(), name_);
}

scratch_database::~scratch_database() {
  try {
    session admin(server_dsn());
    admin.query("DROP DATABASE IF EXISTS \"" + name_ + "\" WITH (FORCE)");
  } catch (...) {
    // A destructor must not throw; a leftover database on a throwaway server is harmless.
  }
}

}  // namespace pgq_test
