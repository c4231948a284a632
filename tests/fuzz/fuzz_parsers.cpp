// Fuzz target for the parts of pgqueue that parse or validate untrusted text: result decoding
// (pg/detail/from_text.hpp, pg/result.hpp), password masking (pg/detail/secrets.hpp), channel
// name checks and quoting (pg/detail/identifier.hpp, to_text.hpp) and option validation.
// The first byte picks the area ('0' to '4'); the rest is its input. Every check aborts on a broken
// invariant, so both libFuzzer (clang -fsanitize=fuzzer) and driver.cpp report it.
#include <libpq-fe.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <pgqueue/pg/detail/from_text.hpp>
#include <pgqueue/pg/detail/identifier.hpp>
#include <pgqueue/pg/detail/secrets.hpp>
#include <pgqueue/pg/detail/to_text.hpp>
#include <pgqueue/pgqueue.hpp>

namespace {

namespace pg = pgqueue::pg;

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
  std::abort();
}

void require(bool ok, const char* what) {
  if (!ok) broken(what);
}

// Pieces of `s` separated by '\x01'.
std::vector<std::string_view> split(std::string_view s) {
  std::vector<std::string_view> out;
  for (;;) {
    auto pos = s.find('\x01');
    out.push_back(s.substr(0, pos));
    if (pos == std::string_view::npos) return out;
    s.remove_prefix(pos + 1);
  }
}

template <class T>
void integer_round_trip(std::string_view text) {
  if (auto v = pg::detail::parse_text<T>(text)) {
    // Only canonical-ish decimal text parses, and it means what it says.
    require(pg::detail::parse_text<T>(std::to_string(*v)) == v, "integer round trip");
    require(!text.empty() && text.front() != '+' && text.front() != ' ', "integer syntax");
  }
}

template <class T>
void float_round_trip(std::string_view text) {
  if (auto v = pg::detail::parse_text<T>(text)) {
    auto back = pg::detail::parse_text<T>(pg::detail::to_text(*v));
    require(back.has_value(), "float text parses back");
    require(std::isnan(*v) ? std::isnan(*back) : *back == *v, "float round trip");
  }
}

void fuzz_from_text(std::string_view text) {
  integer_round_trip<std::int16_t>(text);
  integer_round_trip<std::int32_t>(text);
  integer_round_trip<std::int64_t>(text);
  integer_round_trip<std::uint64_t>(text);
  float_round_trip<double>(text);
  float_round_trip<float>(text);
  auto b = pg::detail::parse_text<bool>(text);
  require(b.has_value() == (text == "t" || text == "f" || text == "true" || text == "false"),
          "bool accepts exactly t/f/true/false");
  require(pg::detail::parse_text<std::string>(text) == std::string(text), "string is verbatim");
}

// Reads every cell of `r` every way; only the documented error codes may come out.
template <class T>
void read_cell(const pg::result& r, int row, int col) {
  try {
    (void)r.get<T>(row, col);
  } catch (const pg::error& e) {
    const auto c = e.code();
    require(c == pg::errc::unexpected_null || c == pg::errc::conversion_failed ||
                c == pg::errc::out_of_range,
            "result::get throws only null/conversion/range errors");
    require(std::strlen(e.what()) < 512, "conversion errors quote a bounded prefix");
  }
}

void fuzz_result(std::string_view input) {
  auto cells = split(input);
  const int cols = static_cast<int>(std::min<std::size_t>(1 + cells.size() % 3, cells.size()));
  PGresult* raw = PQmakeEmptyPGresult(nullptr, PGRES_TUPLES_OK);
  if (!raw) return;
  pg::result r(raw);
  std::vector<std::string> names;
  names.reserve(static_cast<std::size_t>(cols));  // attrs point into it
  std::vector<PGresAttDesc> attrs(static_cast<std::size_t>(cols));
  for (int c = 0; c < cols; ++c) {
    // Column names from the input too (a C string: cut at NUL).
    names.emplace_back(std::string(cells[static_cast<std::size_t>(c)]).c_str());
    attrs[c] = PGresAttDesc{names.back().data(), 0, 0, 0, 25, -1, -1};
  }
  if (!PQsetResultAttrs(raw, cols, attrs.data())) return;
  int n = 0;
  for (auto cell : cells) {
    std::string value(cell);
    const bool null = value == "\x02";
    if (!PQsetvalue(raw, n / cols, n % cols, null ? nullptr : value.data(),
                    null ? -1 : static_cast<int>(value.size()))) {
      return;
    }
    ++n;
  }
  require(r.columns() == cols, "column count");
  for (int row = -1; row <= r.rows(); ++row) {
    for (int col = -1; col <= cols; ++col) {
      read_cell<int>(r, row, col);
      read_cell<std::int64_t>(r, row, col);
      read_cell<double>(r, row, col);
      read_cell<bool>(r, row, col);
      read_cell<std::string>(r, row, col);
      read_cell<std::optional<std::int16_t>>(r, row, col);
      read_cell<std::optional<std::string_view>>(r, row, col);
    }
  }
  for (auto cell : cells) {
    try {
      int c = r.column(cell);
      require(r.column_name(c) == cell, "column() finds the named column");
    } catch (const pg::error& e) {
      require(e.code() == pg::errc::no_such_column, "column() throws no_such_column");
    }
  }
}

void fuzz_secrets(std::string_view conninfo) {
  pg::detail::secret_scrubber s(conninfo);
  (void)s.scrub(std::string(conninfo));  // terminates, whatever the secrets
  // Whatever libpq would take as the password is masked.
  std::string text(conninfo);
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(text.c_str(), &err);
  if (err) PQfreemem(err);
  if (!opts) return;
  for (PQconninfoOption* o = opts; o->keyword; ++o) {
    if (std::string_view(o->keyword) != "password" || !o->val || !*o->val) continue;
    const std::string secret = o->val;
    if (secret.find_first_not_of('*') == std::string::npos) continue;  // masks look like it
    require(s.scrub(secret).find(secret) == std::string::npos, "password masked");
    if (secret.find_first_of("*\n") == std::string::npos) {
      require(s.scrub("\n" + secret + "\n").find(secret) == std::string::npos,
              "password masked inside a message");
    }
  }
  PQconninfoFree(opts);
}

// Undoes quote_identifier: strips the quotes and halves doubled ones.
std::string unquote(std::string_view q) {
  std::string out;
  for (std::size_t i = 1; i + 1 < q.size(); ++i) {
    out += q[i];
    if (q[i] == '"') ++i;
  }
  return out;
}

// Reads back an array literal made by to_array_literal (every element quoted, or NULL).
std::vector<std::optional<std::string>> parse_array(std::string_view a) {
  std::vector<std::optional<std::string>> out;
  require(a.size() >= 2 && a.front() == '{' && a.back() == '}', "array braces");
  std::size_t i = 1;
  while (i < a.size() - 1) {
    if (a.substr(i, 4) == "NULL") {
      out.emplace_back();
      i += 4;
    } else {
      require(a[i] == '"', "array element quoted");
      std::string e;
      for (++i; a[i] != '"'; ++i) {
        if (a[i] == '\\') ++i;
        e += a[i];
      }
      ++i;
      out.emplace_back(std::move(e));
    }
    if (a[i] == ',') ++i;
  }
  return out;
}

void fuzz_names(std::string_view input) {
  try {
    pg::detail::validate_channel(input);
    require(!input.empty() && input.size() <= pg::detail::max_identifier_bytes &&
                input.find('\0') == std::string_view::npos,
            "accepted channel names are 1..63 bytes without NUL");
  } catch (const pg::error& e) {
    require(e.code() == pg::errc::invalid_argument, "channel refused as invalid_argument");
  }
  require(unquote(pg::detail::quote_identifier(input)) == input, "identifier quoting round trip");
  std::vector<std::optional<std::string>> elements;
  for (auto piece : split(input)) {
    if (piece == "\x02") {
      elements.emplace_back();
    } else {
      elements.emplace_back(std::string(piece));
    }
  }
  require(parse_array(pg::detail::to_array_literal(elements)) == elements,
          "array literal round trip");
}

// Option validation: a queue handle takes a lease of 3 ms to 7 days, a heartbeat interval of 0
// (a third of the lease) or 1 ms to less than the lease and a poll interval of 1 ms to 24 h; a
// worker a concurrency of 1 to 10000 and a claim batch of at least 0; a connection durations
// of 0 (the connect timeout 1 ms) to INT_MAX ms with the initial back-off at most the maximum.
// Nothing else is refused (no round trip: the database handle is empty).
void fuzz_options(std::string_view input) {
  using ms = std::chrono::milliseconds;
  std::int64_t v[4] = {};
  std::memcpy(v, input.data(), std::min(input.size(), sizeof v));
  const auto in = [](std::int64_t x, std::int64_t lo, std::int64_t hi) {
    return x >= lo && x <= hi;
  };

  const std::int64_t longest = pg::connect_options::max_duration.count();
  const pg::connect_options c{.connect_timeout = ms(v[0]),
                              .reconnect_initial_backoff = ms(v[1]),
                              .reconnect_max_backoff = ms(v[2]),
                              .reconnect_wait = ms(v[3]),
                              .statement_timeout = ms(v[3])};
  const bool connect_ok =
      in(v[0], 1, longest) && in(v[2], 0, longest) && in(v[1], 0, v[2]) && in(v[3], 0, longest);
  try {
    pg::detail::check_connect_options(c);
    require(connect_ok, "connect accepts only options in range");
  } catch (const pg::error& e) {
    require(!connect_ok && e.code() == pg::errc::invalid_argument,
            "connect refuses bad options as invalid_argument");
  }

  pgqueue::queue_options o;
  o.worker_id = "fuzz";
  o.lease = ms(v[0]);
  o.poll_interval = ms(v[1]);
  o.heartbeat_interval = ms(v[2]);
  const bool queue_ok = in(v[0], pgqueue::queue_options::min_lease.count(),
                           pgqueue::queue_options::max_lease.count()) &&
                        in(v[1], 1, pgqueue::queue_options::max_poll_interval.count()) &&
                        (v[2] == 0 || in(v[2], 1, v[0] - 1));
  try {
    pgqueue::queue q(pgqueue::database{}, "q", o);
    require(queue_ok, "queue accepts only options in range");
    require(q.options().heartbeat_interval.count() > 0 &&
                q.options().heartbeat_interval < q.options().lease,
            "a heartbeat interval is always set, shorter than the lease");
    pgqueue::worker_options w;
    w.concurrency = static_cast<int>(v[3]);
    w.claim_batch = static_cast<int>(v[3] >> 32);
    const bool worker_ok =
        in(w.concurrency, 1, pgqueue::worker_options::max_concurrency) && w.claim_batch >= 0;
    try {
      pgqueue::worker wk(
          q, [](const pgqueue::job&) -> asio::awaitable<void> { co_return; }, w);
      require(worker_ok, "worker accepts only concurrency 1..10000 and claim_batch >= 0");
    } catch (const pg::error& e) {
      require(!worker_ok && e.code() == pgqueue::errc::invalid_argument,
              "worker refuses bad options as invalid_argument");
    }
  } catch (const pg::error& e) {
    require(!queue_ok && e.code() == pgqueue::errc::invalid_argument,
            "queue refuses bad options as invalid_argument");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  // '0'..'4' name the areas in the seed corpus; any other byte maps to one of them too.
  switch (static_cast<unsigned>(data[0] - '0') % 5) {
    case 0:
      fuzz_from_text(input);
      break;
    case 1:
      fuzz_result(input);
      break;
    case 2:
      fuzz_secrets(input);
      break;
    case 3:
      fuzz_names(input);
      break;
    case 4:
      fuzz_options(input);
      break;
  }
  return 0;
}
