// json_file.hpp: a JSON file that a user can edit (a profile, a tuning cache), read: its text
// parsed with the place of the first error, and nlohmann's error texts without their codes
// ("[json.exception.type_error.302] "), so that a refusal reads as a sentence about the file.
#pragma once

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "collmm/types.hpp"

namespace collmm {

// nlohmann's message past its code: "type must be number, but is string".
inline std::string json_error_text(const nlohmann::json::exception& e) {
  const std::string text = e.what();
  const size_t end = text.rfind("] ", text.find(' '));
  return text.rfind("[json.exception.", 0) == 0 && end != std::string::npos ? text.substr(end + 2) : text;
}

// `text` as JSON; UsageError "<what> is not valid JSON: parse error at line 2, column 1: ..." otherwise.
// A key given twice in one object (which nlohmann would take silently, the last one winning) is
// refused: "<what>: \"links.intra_gbps\" is given twice".
inline nlohmann::json parse_json_file(const std::string& text, const std::string& what) {
  std::vector<std::set<std::string>> seen;  // the keys of each object being read, outermost first
  std::vector<std::string> path;            // the key each of them is under
  std::string duplicate;
  auto check = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) {
      seen.emplace_back();
      path.emplace_back();
    } else if (event == E::object_end && !seen.empty()) {
      seen.pop_back();
      path.pop_back();
    } else if (event == E::key && !seen.empty()) {
      const std::string key = parsed.get<std::string>();
      path.back() = key;
      if (!seen.back().insert(key).second && duplicate.empty()) {
        for (const std::string& k : path) duplicate += (duplicate.empty() ? "" : ".") + k;
      }
    }
    return true;
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text, check);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(what + " is not valid JSON: " + json_error_text(e));
  }
  if (!duplicate.empty()) throw UsageError(what + ": \"" + duplicate + "\" is given twice");
  return j;
}

// j[key] as text, or as a number; UsageError naming the key where it holds another type
// ("\"dtype\": 3 is not a name"). An absent key is nlohmann's error ("key 'dtype' not found").
inline std::string json_string(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_string()) throw UsageError(std::string("\"") + key + "\": " + v.dump() + " is not a name");
  return v.get<std::string>();
}
inline double json_double(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_number()) throw UsageError(std::string("\"") + key + "\": " + v.dump() + " is not a number");
  return v.get<double>();
}

}  // namespace collmm
