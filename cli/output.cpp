#include "output.hpp"

#include <algorithm>
#include <ostream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

namespace pgqueue_cli {

std::size_t columns_of(std::string_view text) {
  return static_cast<std::size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xc0) != 0x80; }));
}

namespace {

// Whether `name` is one of the comma-separated names in `list`.
bool listed(const std::string& list, std::string_view name) {
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item == name) return true;
  }
  return false;
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

void print(std::ostream& out, const pgqueue::pg::result& r, bool json, const std::string& as_json,
           const std::string& boolean) {
  if (json) {
    auto rows = nlohmann::json::array();
    for (int i = 0; i < r.rows(); ++i) {
      nlohmann::json row = nlohmann::json::object();
      for (int c = 0; c < r.columns(); ++c) {
        const std::string name(r.column_name(c));
        if (r.is_null(i, c)) {
          row[name] = nullptr;
        } else if (listed(as_json, name)) {
          row[name] = nlohmann::json::parse(r.get<std::string>(i, c));
        } else if (listed(boolean, name)) {
          row[name] = r.get<bool>(i, c);
        } else {
          row[name] = r.get<std::string>(i, c);
        }
      }
      rows.push_back(std::move(row));
    }
    out << rows.dump(2) << "\n";
    return;
  }
  std::vector<std::size_t> width(static_cast<std::size_t>(r.columns()));
  std::vector<std::vector<std::string>> cells(static_cast<std::size_t>(r.rows()));
  for (int c = 0; c < r.columns(); ++c) width[c] = r.column_name(c).size();
  for (int i = 0; i < r.rows(); ++i) {
    for (int c = 0; c < r.columns(); ++c) {
      cells[i].push_back(r.is_null(i, c) ? "-" : printable(r.get<std::string>(i, c)));
      width[c] = std::max(width[c], columns_of(cells[i].back()));
    }
  }
  auto line = [&](auto cell_of) {
    for (int c = 0; c < r.columns(); ++c) {
      std::string text = cell_of(c);
      out << text;
      if (c + 1 < r.columns()) out << std::string(width[c] - columns_of(text) + 2, ' ');
    }
    out << "\n";
  };
  line([&](int c) { return printable(r.column_name(c)); });
  for (int i = 0; i < r.rows(); ++i) line([&](int c) { return cells[i][c]; });
}

}  // namespace pgqueue_cli
