// enum_names.hpp: an enum's values and the names a user types for them, read both ways: name()
// prints one, parse() reads one back and throws UsageError naming the expected ones; longest() sizes
// a table column.
#pragma once

#include <algorithm>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "collmm/types.hpp"

namespace collmm {

template <class E>
struct EnumNames {
  std::vector<std::pair<E, const char*>> items;
  std::string name(E e) const {
    for (auto& [v, s] : items)
      if (v == e) return s;
    return "?";
  }
  E parse(const std::string& s, const char* what) const {
    for (auto& [v, n] : items)
      if (s == n) return v;
    std::ostringstream msg;
    msg << "unknown " << what << " '" << s << "' (expected one of:";
    for (auto& [v, n] : items) msg << ' ' << n;
    msg << ')';
    throw UsageError(msg.str());
  }
  // The longest name: a table column wide enough for every value.
  size_t longest() const {
    size_t n = 0;
    for (auto& [v, s] : items) n = std::max(n, std::string(s).size());
    return n;
  }
};

// The names of a table's rows (name, and the enum value in member `key`) and its values, in order.
template <class E, class Row>
EnumNames<E> names_of_rows(const std::vector<Row>& rows, E Row::*key) {
  EnumNames<E> names;
  for (const Row& row : rows) names.items.emplace_back(row.*key, row.name);
  return names;
}
template <class E, class Row>
std::vector<E> values_of_rows(const std::vector<Row>& rows, E Row::*key) {
  std::vector<E> values;
  for (const Row& row : rows) values.push_back(row.*key);
  return values;
}

}  // namespace collmm
