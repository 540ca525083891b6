// json_number.hpp: whole numbers read from a JSON file (profiles, tuning caches) that a user can
// edit: a value that is not an integer, or does not fit the type, is a UsageError naming the key.
// (nlohmann's get<int64_t>() converts any number, and a float beyond the type's range is undefined
// behaviour: the fuzz target found 6.5e141 as an "m".)
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "collmm/types.hpp"
#include "json_file.hpp"

namespace collmm {

template <class Int>
Int json_integer(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  if (v.is_number_unsigned() && v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<Int>::max()))
    return static_cast<Int>(v.get<uint64_t>());
  if (v.is_number_integer() && !v.is_number_unsigned()) {
    const int64_t x = v.get<int64_t>();
    if (x >= static_cast<int64_t>(std::numeric_limits<Int>::min()) &&
        x <= static_cast<int64_t>(std::numeric_limits<Int>::max()))
      return static_cast<Int>(x);
  }
  throw UsageError(std::string("\"") + key + "\": " + json_brief(v) + " is not an integer of this range");
}

template <class Int>
Int json_integer(const nlohmann::json& j, const char* key, Int fallback) {
  return j.contains(key) ? json_integer<Int>(j, key) : fallback;
}

}  // namespace collmm
