// Builder for statement parameters ($1, $2, ...), sent in text format.
#pragma once

#include <concepts>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "pgqueue/pg/detail/to_text.hpp"
#include "pgqueue/pg/error.hpp"

namespace pgqueue::pg {

/// Ordered parameter values for one statement. Each value is kept as text (or NULL) and bound
/// as `$1..$n`, so user data never becomes part of the SQL string. Building costs no round trip.
///
/// Accepted values: `std::nullopt` (NULL), strings (`std::string`, `std::string_view`,
/// `const char*`), integers, `bool`, floating point, `std::optional` of those (empty → NULL),
/// and `std::vector` of those, encoded as a one-dimensional array literal (cast it in SQL, e.g.
/// `$1::text[]`). Throws `pg::error` (`errc::invalid_argument`) for a string containing a NUL
/// byte, which libpq would otherwise truncate silently.
class params {
 public:
  params() = default;

  /// `pg::params{std::int64_t{5}, "text", std::nullopt}`.
  template <class... Ts>
  requires(sizeof...(Ts) > 0 &&
           !(sizeof...(Ts) == 1 && (std::same_as<std::remove_cvref_t<Ts>, params> && ...)))
      params(Ts&&... values) {  // NOLINT(google-explicit-constructor): brace-list construction
    values_.reserve(sizeof...(Ts));
    (add(std::forward<Ts>(values)), ...);
  }

  /// Appends SQL NULL.
  params& add(std::nullopt_t) {
    values_.emplace_back(std::nullopt);
    return *this;
  }

  params& add(std::string_view v) { return push(std::string(v)); }
  params& add(const char* v) { return push(std::string(v)); }
  params& add(std::string v) { return push(std::move(v)); }
  params& add(bool v) { return push(detail::to_text(v)); }

  template <class T>
  requires(std::integral<T> || std::floating_point<T>) && (!std::same_as<T, bool>)params& add(T v) {
    return push(detail::to_text(v));
  }

  /// An empty optional binds NULL.
  template <class T>
  params& add(const std::optional<T>& v) {
    if (!v) return add(std::nullopt);
    return add(*v);
  }

  /// Binds an array literal; elements may be std::optional (empty → NULL element).
  template <class T>
  params& add(const std::vector<T>& v) {
    return push(detail::to_array_literal(v));
  }

  /// Number of parameters.
  std::size_t size() const noexcept { return values_.size(); }
  bool empty() const noexcept { return values_.empty(); }
  /// Text of parameter `i` (0-based), or nullopt for NULL.
  const std::optional<std::string>& operator[](std::size_t i) const { return values_.at(i); }

  /// libpq-style pointer array (nullptr for NULL); valid until this object is modified.
  std::vector<const char*> pointers() const {
    std::vector<const char*> out;
    out.reserve(values_.size());
    for (const auto& v : values_) out.push_back(v ? v->c_str() : nullptr);
    return out;
  }

 private:
  params& push(std::string text) {
    detail::reject_nul(text, "parameter $" + std::to_string(values_.size() + 1));
    values_.emplace_back(std::move(text));
    return *this;
  }

  std::vector<std::optional<std::string>> values_;
};

}  // namespace pgqueue::pg
