// Owning, move-only view of one statement's result rows.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "pgqueue/pg/detail/from_text.hpp"
#include "pgqueue/pg/detail/libpq_handles.hpp"
#include "pgqueue/pg/error.hpp"

namespace pgqueue::pg {

/// The rows (or command status) of one successful statement; owns its `PGresult`. Move-only.
/// All accessors are local (no round trip). A bad index throws `pg::error` with
/// `errc::out_of_range`; an unknown column name throws `errc::no_such_column`.
class result {
 public:
  /// An empty result (no rows, no columns).
  result() = default;
  /// Takes ownership of `res` (may be null).
  explicit result(PGresult* res) noexcept : res_(res) {}

  /// Number of rows.
  int rows() const noexcept { return res_ ? PQntuples(res_.get()) : 0; }
  /// Number of columns.
  int columns() const noexcept { return res_ ? PQnfields(res_.get()) : 0; }
  /// Name of column `col`.
  std::string_view column_name(int col) const {
    check_column(col);
    return PQfname(res_.get(), col);
  }
  /// Index of the column named exactly `name` (case-sensitive; no identifier folding).
  /// Throws `errc::no_such_column` when absent.
  int column(std::string_view name) const {
    for (int c = 0; c < columns(); ++c) {
      if (name == PQfname(res_.get(), c)) return c;
    }
    throw error(errc::no_such_column, "result has no column named \"" + std::string(name) + "\"");
  }

  /// Whether the value at (`row`, `col`) is SQL NULL.
  bool is_null(int row, int col) const {
    check_cell(row, col);
    return PQgetisnull(res_.get(), row, col) != 0;
  }

  /// Value at (`row`, `col`) as T: integers, floating point, bool, `std::string`,
  /// `std::string_view` (points into this result) or `std::optional` of those (NULL → nullopt).
  /// Throws `errc::unexpected_null` for NULL into a non-optional T and `errc::conversion_failed`
  /// when the text is not a valid T (including overflow).
  template <class T>
  T get(int row, int col) const {
    check_cell(row, col);
    const bool null = PQgetisnull(res_.get(), row, col) != 0;
    if constexpr (detail::is_optional<T>::value) {
      if (null) return std::nullopt;
      return convert<typename T::value_type>(row, col);
    } else {
      if (null) {
        throw error(errc::unexpected_null,
                    describe(row, col) + " is NULL; read it as std::optional to accept NULL");
      }
      return convert<T>(row, col);
    }
  }

  /// `get<T>(row, column(name))`.
  template <class T>
  T get(int row, std::string_view name) const {
    return get<T>(row, column(name));
  }

  /// Rows affected by INSERT/UPDATE/DELETE/MERGE/SELECT/COPY... (PQcmdTuples); 0 otherwise.
  std::int64_t affected_rows() const noexcept {
    if (!res_) return 0;
    std::string_view text = PQcmdTuples(res_.get());
    return detail::parse_text<std::int64_t>(text).value_or(0);
  }

  /// Command tag, e.g. "INSERT 0 3".
  std::string_view command_tag() const noexcept { return res_ ? PQcmdStatus(res_.get()) : ""; }

  /// The underlying libpq result (still owned by this object), or nullptr when empty.
  PGresult* native_handle() const noexcept { return res_.get(); }

 private:
  template <class T>
  T convert(int row, int col) const {
    std::string_view text(PQgetvalue(res_.get(), row, col),
                          static_cast<std::size_t>(PQgetlength(res_.get(), row, col)));
    if (auto v = detail::parse_text<T>(text)) return *std::move(v);
    throw error(errc::conversion_failed, describe(row, col) + " holds \"" +
                                             std::string(text.substr(0, 64)) +
                                             "\", which is not a valid " + type_name<T>());
  }

  template <class T>
  static std::string type_name() {
    if constexpr (std::is_same_v<T, bool>)
      return "bool";
    else if constexpr (std::is_integral_v<T>)
      return std::to_string(sizeof(T) * 8) + "-bit integer";
    else if constexpr (std::is_floating_point_v<T>)
      return "floating-point number";
    else
      return "string";
  }

  std::string describe(int row, int col) const {
    return "column " + std::to_string(col) + " (\"" + PQfname(res_.get(), col) + "\") of row " +
           std::to_string(row);
  }

  void check_column(int col) const {
    if (col < 0 || col >= columns()) {
      throw error(errc::out_of_range, "column index " + std::to_string(col) +
                                          " is out of range (result has " +
                                          std::to_string(columns()) + " columns)");
    }
  }

  void check_cell(int row, int col) const {
    check_column(col);
    if (row < 0 || row >= rows()) {
      throw error(errc::out_of_range, "row index " + std::to_string(row) +
                                          " is out of range (result has " + std::to_string(rows()) +
                                          " rows)");
    }
  }

  detail::result_ptr res_;
};

}  // namespace pgqueue::pg
