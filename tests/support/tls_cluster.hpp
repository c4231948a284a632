// A dedicated cluster for transport and authentication tests: TLS on 127.0.0.1 with a server
// certificate for "localhost" signed by a throwaway CA, and password authentication over TCP
// for every role except postgres.
#pragma once

#include <memory>
#include <string>

#include "support/cluster.hpp"

namespace pgq_test {

class tls_cluster {
 public:
  // The process-wide one, started on first use (certificates made with the openssl CLI).
  static tls_cluster& shared();
  ~tls_cluster();
  tls_cluster(const tls_cluster&) = delete;
  tls_cluster& operator=(const tls_cluster&) = delete;

  // Unix-socket conninfo as postgres (trust): for set-up such as creating roles.
  const std::string& admin_dsn() const { return cluster_->dsn(); }
  // The CA certificate that signed the server's (for sslrootcert).
  const std::string& ca_file() const { return ca_file_; }
  // The server's certificate (not a CA: trusting only it must fail verification).
  std::string server_cert_file() const { return dir_ + "/server.crt"; }
  int port() const { return cluster_->port(); }
  // A key=value conninfo over TCP to 127.0.0.1 naming the server `host` (what verify-full
  // checks the certificate against) with `sslmode`, trusting ca_file().
  std::string tcp_dsn(const std::string& host = "localhost",
                      const std::string& sslmode = "verify-full") const;

 private:
  tls_cluster();
  std::string dir_;  // certificates
  std::string ca_file_;
  std::unique_ptr<throwaway_cluster> cluster_;
};

}  // namespace pgq_test
