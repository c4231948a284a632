#include "support/cluster.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern char** environ;

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

// Starts a process that runs `cleanup` (shell) once this process has ended, however it ends:
// it waits for the end of a pipe whose only writer is this process. An abort, a crash or a
// kill runs no destructor, and left the cluster running. Returns the pipe's write end (-1 if
// the reaper could not start: best effort).
int start_reaper(const std::string& cleanup) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_adddup2(&actions, fds[0], 0);  // (dup2 clears close-on-exec)
  // Not the test's output: a runner waiting for its end would wait for the reaper too.
  ::posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  ::posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawnattr_t attributes;
  ::posix_spawnattr_init(&attributes);
  ::posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSID);  // not killed with our group
  std::string script = "cat >/dev/null; " + cleanup;
  char sh[] = "/bin/sh", dash_c[] = "-c";
  char* argv[] = {sh, dash_c, script.data(), nullptr};
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, sh, &actions, &attributes, argv, environ);
  ::posix_spawn_file_actions_destroy(&actions);
  ::posix_spawnattr_destroy(&attributes);
  ::close(fds[0]);
  if (rc != 0) {
    ::close(fds[1]);
    return -1;
  }
  return fds[1];
}

// A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it; the server binds it
// right after, so a collision is unlikely and fails the start loudly).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("could not find a free TCP port");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

void append_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path, std::ios::app);
  for (const auto& l : lines) out << l << "\n";
  if (!out) throw std::runtime_error("cannot write " + path);
}

void prepend_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::ostringstream old;
  old << std::ifstream(path).rdbuf();
  std::ofstream out(path, std::ios::trunc);
  for (const auto& l : lines) out << l << "\n";
  out << old.str();
  if (!out) throw std::runtime_error("cannot write " + path);
}

// Where a cluster's directory goes: what scripts/lib.sh's pg_scratch_parent says for the
// scripts' test clusters (in memory when /dev/shm has room, else /tmp; a third of the test
// suites' CPU on a disk). A durable cluster loses nothing there either: what these tests do to
// a server is kill it, not the machine, and a commit is in the kernel's page cache before it
// returns.
std::string cluster_parent() {
  std::string dir = run_capture("bash -c '. \"" PGQUEUE_SOURCE_ROOT
                                "/scripts/lib.sh\" && pg_scratch_parent'");
  return dir.empty() ? "/tmp" : dir;
}

}  // namespace

throwaway_cluster& throwaway_cluster::shared() {
  static throwaway_cluster cluster;
  return cluster;
}

namespace {
cluster_options with_durability(bool durable) {
  cluster_options o;
  o.durable = durable;
  return o;
}
}  // namespace

throwaway_cluster::throwaway_cluster(bool durable) : throwaway_cluster(with_durability(durable)) {}

throwaway_cluster::throwaway_cluster(const cluster_options& options) : bindir_(find_bindir()) {
  std::string tmpl = cluster_parent() + "/pgqueue-test-XXXXXX";
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed in " + tmpl);
  dir_ = tmpl;
  if (::geteuid() == 0) {
    const passwd* pw = ::getpwnam(server_user);
    if (!pw)
      throw std::runtime_error("running as root needs the 'postgres' user to own the server");
    if (::chown(dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0)
      throw std::runtime_error("chown of " + dir_ + " failed");
  }
  ::chmod(dir_.c_str(), 0755);
  run_or_throw(as_owner(bindir_ + "/initdb -D " + dir_ + "/data -A trust -U postgres -E UTF8 " +
                        "--locale=C --no-sync >" + dir_ + "/initdb.log 2>&1"),
               "initdb");
  // The files belong to the server's user; as root we may still write them.
  if (!options.config_lines.empty())
    append_lines(dir_ + "/data/postgresql.conf", options.config_lines);
  if (!options.hba_lines.empty()) prepend_lines(dir_ + "/data/pg_hba.conf", options.hba_lines);
  std::string listen = "''";
  if (options.tcp) {
    port_ = free_port();
    listen = "127.0.0.1 -p " + std::to_string(port_);
  }
  opts_ = "-k " + dir_ + " -c listen_addresses=" + listen + " -c max_connections=200";
  if (!options.durable) opts_ += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off";
  reaper_ = start_reaper(pg_ctl_command("-m immediate stop") + "; rm -rf " + dir_);
  if (start() != 0) throw std::runtime_error("pg_ctl start failed in " + dir_);
  dsn_ = "host=" + dir_ + " user=postgres dbname=postgres";
  if (options.tcp) dsn_ += " port=" + std::to_string(port_);  // names the socket file too
}

throwaway_cluster::~throwaway_cluster() {
  pg_ctl("-m immediate stop");
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  if (reaper_ >= 0) ::close(reaper_);  // its work is done: it ends
}

int throwaway_cluster::stop() const {
  return pg_ctl("-m fast stop");
}

int throwaway_cluster::start() const {
  return pg_ctl("-o \"" + opts_ + "\" start");
}

int throwaway_cluster::pg_ctl(const std::string& args) const {
  return std::system(pg_ctl_command(args).c_str());
}

std::string throwaway_cluster::pg_ctl_command(const std::string& args) const {
  return as_owner(bindir_ + "/pg_ctl -D " + dir_ + "/data -l " + dir_ + "/server.log -w " + args +
                  " >/dev/null 2>&1");
}

}  // namespace pgq_test
