#include "support/tls_cluster.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace pgq_test {
namespace {

void run(const std::string& cmd) {
  if (std::system((cmd + " >/dev/null 2>&1").c_str()) != 0) {
    throw std::runtime_error("failed: " + cmd);
  }
}

// The server refuses a key readable by others, and one it does not own unless root owns it.
void hand_to_server(const std::string& path, mode_t mode) {
  if (::geteuid() == 0) {
    if (const passwd* pw = ::getpwnam("postgres")) {
      if (::chown(path.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
        throw std::runtime_error("chown " + path + " failed");
      }
    }
  }
  ::chmod(path.c_str(), mode);
}

}  // namespace

tls_cluster& tls_cluster::shared() {
  static tls_cluster c;
  return c;
}

tls_cluster::tls_cluster() {
  char tmpl[] = "/tmp/pgqueue-tls-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  ::chmod(dir_.c_str(), 0755);
  ca_file_ = dir_ + "/ca.crt";
  const std::string key = dir_ + "/server.key", crt = dir_ + "/server.crt";
  // P-256 keys: quick to generate. The server certificate names "localhost" only (no IP),
  // so verify-full against any other host name must fail.
  const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  run("openssl req -x509 -days 2" + ec + " -keyout " + dir_ + "/ca.key -out " + ca_file_ +
      " -subj '/CN=pgqueue test CA' -addext basicConstraints=critical,CA:TRUE" +
      " -addext keyUsage=critical,keyCertSign,cRLSign");
  run("openssl req" + ec + " -keyout " + key + " -out " + dir_ + "/server.csr -subj /CN=localhost");
  std::ofstream(dir_ + "/server.ext") << "subjectAltName=DNS:localhost\n"
                                         "extendedKeyUsage=serverAuth\n";
  run("openssl x509 -req -days 2 -in " + dir_ + "/server.csr -CA " + ca_file_ + " -CAkey " + dir_ +
      "/ca.key -CAcreateserial -out " + crt + " -extfile " + dir_ + "/server.ext");
  hand_to_server(key, 0600);
  hand_to_server(crt, 0644);
  ::chmod(ca_file_.c_str(), 0644);

  cluster_options o;
  o.tcp = true;
  o.config_lines = {"ssl = on", "ssl_cert_file = '" + crt + "'", "ssl_key_file = '" + key + "'",
                    "password_encryption = 'scram-sha-256'"};
  o.hba_lines = {"hostssl all postgres 127.0.0.1/32 trust",
                 "host all all 127.0.0.1/32 scram-sha-256"};
  cluster_ = std::make_unique<throwaway_cluster>(o);
}

tls_cluster::~tls_cluster() {
  cluster_.reset();  // stops the server before its certificates go
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string tls_cluster::tcp_dsn(const std::string& host, const std::string& sslmode) const {
  return "host=" + host + " hostaddr=127.0.0.1 port=" + std::to_string(port()) +
         " sslmode=" + sslmode + " sslrootcert=" + ca_file_ + " user=postgres dbname=postgres";
}

}  // namespace pgq_test
