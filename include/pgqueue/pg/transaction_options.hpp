// How a transaction begins, and how often a scoped one runs its body again.
#pragma once

namespace pgqueue::pg {

/// The isolation level a transaction begins with.
enum class isolation { read_committed, repeatable_read, serializable };

/// How a transaction begins, and how often `in_transaction` runs its body.
struct transaction_options {
  isolation level = isolation::read_committed;
  bool read_only = false;
  /// in_transaction: runs of the body at most, when it or the commit fails with SQLSTATE 40001
  /// (serialization failure) or 40P01 (deadlock) (1 to 100). Other errors are not retried.
  int max_attempts = 5;
};

}  // namespace pgqueue::pg
