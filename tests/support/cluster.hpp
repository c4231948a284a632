// A throwaway PostgreSQL cluster: initdb into a temp directory, listening only on a unix
// socket in that directory (no TCP port to collide with, unless asked for), removed when the
// process exits, also when it aborts or is killed.
#pragma once

#include <string>
#include <vector>

namespace pgq_test {

// What a dedicated cluster needs beyond the default (unix socket only, trust for everyone).
struct cluster_options {
  bool durable = false;                   // fsync and synchronous_commit on
  bool tcp = false;                       // also listen on 127.0.0.1, on a port the OS picks
  std::vector<std::string> config_lines;  // appended to postgresql.conf (e.g. "ssl = on")
  std::vector<std::string> hba_lines;     // put before initdb's trust lines in pg_hba.conf
};

class throwaway_cluster {
 public:
  // The process-wide cluster, started on first use.
  static throwaway_cluster& shared();

  // Starts a cluster; `durable` keeps fsync and synchronous_commit on (an immediate shutdown
  // then loses no commit), other tests turn them off for speed.
  explicit throwaway_cluster(bool durable = false);
  explicit throwaway_cluster(const cluster_options& options);
  ~throwaway_cluster();
  throwaway_cluster(const throwaway_cluster&) = delete;
  throwaway_cluster& operator=(const throwaway_cluster&) = delete;

  const std::string& dsn() const { return dsn_; }
  const std::string& directory() const { return dir_; }
  // The TCP port on 127.0.0.1 (0 unless started with `tcp`).
  int port() const { return port_; }
  // Runs pg_ctl with `args` as the cluster's owner; returns its exit status.
  int pg_ctl(const std::string& args) const;
  // The shell command pg_ctl() runs.
  std::string pg_ctl_command(const std::string& args) const;
  // Stops the server (fast mode: sessions are terminated) and waits until it is down.
  int stop() const;
  // Starts it again with the options it was created with; waits until it accepts connections.
  int start() const;

 private:
  std::string dir_;
  std::string opts_;
  std::string bindir_;
  std::string dsn_;
  int port_ = 0;
  int reaper_ = -1;  // the pipe that keeps the cluster's reaper waiting (see cluster.cpp)
};

}  // namespace pgq_test
