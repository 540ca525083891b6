// json_file.hpp: a JSON file that a user can edit (a profile, a tuning cache), read: its text
// parsed with the place of the first error, and nlohmann's error texts without their codes
// ("[json.exception.type_error.302] "), so that a refusal reads as a sentence about the file.
#pragma once

#include <algorithm>
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

// The first key given twice in one object of a JSON text, as its path ("links.intra_gbps"; "" when
// none): a SAX pass beside the parse (nlohmann keeps the last of two keys silently).
class DuplicateKeys : public nlohmann::json_sax<nlohmann::json> {
 public:
  const std::string& first() const { return first_; }
  bool start_object(std::size_t) override {
    if (depth_ == levels_.size()) levels_.emplace_back();
    Level& l = levels_[depth_++];
    l.keys.clear();
    l.many.clear();
    l.key.clear();
    return true;
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool key(string_t& key) override {
    Level& l = levels_[depth_ - 1];
    l.key = key;
    // A few keys are searched in a list; an object with many keeps a set.
    const bool seen =
        l.keys.size() < 16 ? std::find(l.keys.begin(), l.keys.end(), key) != l.keys.end() : !l.many.insert(key).second;
    if (l.keys.size() < 16) {
      l.keys.push_back(key);
      if (l.keys.size() == 16) l.many.insert(l.keys.begin(), l.keys.end());
    }
    if (seen && first_.empty())
      for (size_t i = 0; i < depth_; ++i) first_ += (first_.empty() ? "" : ".") + levels_[i].key;
    return first_.empty();
  }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  struct Level {
    std::vector<std::string> keys;
    std::set<std::string> many;
    std::string key;  // the last key read: the path to what follows
  };
  std::vector<Level> levels_;
  size_t depth_ = 0;
  std::string first_;
};

// `text` as JSON; UsageError "<what> is not valid JSON: parse error at line 2, column 1: ..." otherwise.
// A key given twice in one object is refused: "<what>: \"links.intra_gbps\" is given twice".
inline nlohmann::json parse_json_file(const std::string& text, const std::string& what) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(what + " is not valid JSON: " + json_error_text(e));
  }
  DuplicateKeys duplicates;
  nlohmann::json::sax_parse(text, &duplicates);
  if (!duplicates.first().empty()) throw UsageError(what + ": \"" + duplicates.first() + "\" is given twice");
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
