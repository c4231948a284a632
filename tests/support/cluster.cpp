#include "support/cluster.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

namespace pgq_test {
namespace {

// initdb refuses to run as root, so as root the server runs as this unprivileged user.
constexpr const char* server_user = "postgres";

std::string run_capture(const std::string& cmd) {
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    ::pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string find_bindir() {
  if (const char* env = std::getenv("PGQUEUE_PG_BINDIR"); env && *env) return env;
  std::string dir = run_capture("pg_config --bindir 2>/dev/null");
  if (!dir.empty() && std::filesystem::exists(dir + "/initdb")) return dir;
  for (int v = 20; v >= 12; --v) {
    std::string d = "/usr/lib/postgresql/" + std::to_string(v) + "/bin";
    if (std::filesystem::exists(d + "/initdb")) return d;
  }
  throw std::runtime_error("no PostgreSQL server binaries (initdb) found; install postgresql");
}

std::string as_owner(const std::string& cmd) {
  if (::geteuid() != 0) return cmd;
  return std::string("runuser -u ") + server_user + " -- " + cmd;
}

void run_or_throw(const std::string& cmd, const std::string& what) {
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error(what + " failed: " + cmd);
}

}  // namespace

throwaway_cluster& throwaway_cluster::shared() {
  static throwaway_cluster cluster;
  return cluster;
}

throwaway_cluster::throwaway_cluster(bool durable) : bindir_(find_bindir()) {
  char tmpl[] = "/tmp/pgqueue-test-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  if (::geteuid() == 0) {
    const passwd* pw = ::getpwnam(server_user);
    if (!pw) throw std::runtime_error("running as root needs the 'postgres' user to own the server");
    if (::chown(dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0)
      throw std::runtime_error("chown of " + dir_ + " failed");
  }
  ::chmod(dir_.c_str(), 0755);
  run_or_throw(as_owner(bindir_ + "/initdb -D " + dir_ + "/data -A trust -U postgres -E UTF8 " +
                        "--locale=C --no-sync >" + dir_ + "/initdb.log 2>&1"),
               "initdb");
  std::string opts = "-k " + dir_ + " -c listen_addresses='' -c max_connections=200";
  if (!durable) opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off";
  run_or_throw(as_owner(bindir_ + "/pg_ctl -D " + dir_ + "/data -l " + dir_ + "/server.log -w " +
                        "-o \"" + opts + "\" start >/dev/null"),
               "pg_ctl start");
  dsn_ = "host=" + dir_ + " user=postgres dbname=postgres";
}

throwaway_cluster::~throwaway_cluster() {
  pg_ctl("-m immediate stop");
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

int throwaway_cluster::pg_ctl(const std::string& args) const {
  return std::system(
      as_owner(bindir_ + "/pg_ctl -D " + dir_ + "/data -l " + dir_ + "/server.log -w " + args +
               " >/dev/null 2>&1")
          .c_str());
}

}  // namespace pgq_test
