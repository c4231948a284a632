#include "support/role.hpp"

#include <unistd.h>

#include <atomic>

#include "support/session.hpp"

namespace pgq_test {

scoped_role::scoped_role(std::string admin_dsn, const std::string& prefix,
                         const std::string& password)
    : admin_dsn_(std::move(admin_dsn)) {
  static std::atomic<int> counter{0};
  name_ = "pgq_" + prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(++counter);
  session admin(admin_dsn_);
  // A parameter cannot stand in for a password in CREATE ROLE: quote it as a literal.
  std::string sql = "CREATE ROLE " + name_ + " LOGIN";
  if (!password.empty()) {
    sql += " PASSWORD " + *admin.scalar("SELECT quote_literal($1)", {password});
  }
  admin.query(sql);
}

scoped_role::~scoped_role() {
  // DROP OWNED needs the database: declare the role after the scratch database so it goes
  // first. A destructor must not throw; a leftover role has a unique name and harms nobody.
  try {
    session admin(admin_dsn_);
    admin.query("DROP OWNED BY " + name_);
    admin.query("DROP ROLE " + name_);
  } catch (...) {
  }
}

}  // namespace pgq_test
