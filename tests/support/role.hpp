// A throwaway login role for privilege and authentication tests.
#pragma once

#include <string>

namespace pgq_test {

// Creates a LOGIN role with a unique name (and a password when given) through `admin_dsn`;
// the destructor revokes what it was granted in that database (DROP OWNED) and drops it, so a
// test leaves no role behind. Roles are cluster-wide: the unique name keeps tests apart.
class scoped_role {
 public:
  scoped_role(std::string admin_dsn, const std::string& prefix, const std::string& password = "");
  ~scoped_role();
  scoped_role(const scoped_role&) = delete;
  scoped_role& operator=(const scoped_role&) = delete;

  const std::string& name() const { return name_; }
  // `admin_dsn` connecting as this role instead (a later keyword wins in a conninfo).
  std::string dsn() const { return admin_dsn_ + " user=" + name_; }

 private:
  std::string admin_dsn_;
  std::string name_;
};

}  // namespace pgq_test
