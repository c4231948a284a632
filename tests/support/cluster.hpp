// A throwaway PostgreSQL cluster: initdb into a temp directory, listening only on a unix
// socket in that directory (no TCP port to collide with), removed when the process exits.
#pragma once

#include <string>

namespace pgq_test {

class throwaway_cluster {
 public:
  // The process-wide cluster, started on first use.
  static throwaway_cluster& shared();

  // Starts a cluster; `durable` keeps fsync on (benchmarks), tests turn it off for speed.
  explicit throwaway_cluster(bool durable = false);
  ~throwaway_cluster();
  throwaway_cluster(const throwaway_cluster&) = delete;
  throwaway_cluster& operator=(const throwaway_cluster&) = delete;

  const std::string& dsn() const { return dsn_; }
  const std::string& directory() const { return dir_; }
  // Runs pg_ctl with `args` as the cluster's owner; returns its exit status.
  int pg_ctl(const std::string& args) const;

 private:
  std::string dir_;
  std::string bindir_;
  std::string dsn_;
};

}  // namespace pgq_test
