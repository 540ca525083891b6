// json_file.hpp: a JSON file that a user can edit (a profile, a tuning cache), read. Its text is
// parsed with the place of the first error, its depth bounded (kMaxJsonDepth), and values in
// messages cut short (json_brief). nlohmann's error texts lose their codes
// ("[json.exception.type_error.302] "), so that a refusal reads as a sentence about the file.
#pragma once

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "collmm/sizes.hpp"
#include "collmm/types.hpp"
#include "quote.hpp"

namespace collmm {

// nlohmann's message past its code: "type must be number, but is string".
inline std::string json_error_text(const nlohmann::json::exception& e) {
  const std::string text = e.what();
  const size_t end = text.rfind("] ", text.find(' '));
  return text.rfind("[json.exception.", 0) == 0 && end != std::string::npos ? text.substr(end + 2) : text;
}

// One SAX pass over a JSON text before it is parsed into values (nlohmann's parser itself is
// iterative, but printing or freeing a value recurses). It finds the first place nested deeper
// than kMaxJsonDepth and the first key given twice in one object (nlohmann keeps the last of two
// keys silently), each as its path ("entries[0].algo"), and the parse error's text.
class JsonFileChecks : public nlohmann::json_sax<nlohmann::json> {
 public:
  const std::string& too_deep() const { return too_deep_; }
  const std::string& duplicate() const { return duplicate_; }
  const std::string& error() const { return error_; }
  bool start_object(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(true); }
  bool end_array() override { return close(); }
  bool key(string_t& key) override {
    Level& l = levels_.back();
    l.key = key;
    // A few keys are searched in a list; an object with many keeps a set.
    const bool seen =
        l.keys.size() < 16 ? std::find(l.keys.begin(), l.keys.end(), key) != l.keys.end() : !l.many.insert(key).second;
    if (l.keys.size() < 16) {
      l.keys.push_back(key);
      if (l.keys.size() == 16) l.many.insert(l.keys.begin(), l.keys.end());
    }
    if (seen) duplicate_ = path();
    return !seen;
  }
  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error_ = cut(json_error_text(e), 200);  // it quotes the last token read, of any length
    return false;
  }

 private:
  struct Level {
    bool array = false;
    size_t items = 0;  // an array's values so far
    std::vector<std::string> keys;
    std::set<std::string> many;
    std::string key;  // an object's last key read: the path to what follows
  };
  // The path to the value read last: "entries[3].algo" (keys cut short).
  std::string path() const {
    std::string p;
    for (const Level& l : levels_)
      p += l.array ? "[" + std::to_string(l.items == 0 ? 0 : l.items - 1) + "]"
                   : (p.empty() ? "" : ".") + cut(l.key, 40);
    return p;
  }
  bool value() {
    if (!levels_.empty() && levels_.back().array) ++levels_.back().items;
    return true;
  }
  bool open(bool array) {
    value();
    if (levels_.size() >= static_cast<size_t>(kMaxJsonDepth)) {
      too_deep_ = cut(path(), 100);
      return false;
    }
    levels_.push_back(Level{array, 0, {}, {}, {}});
    return true;
  }
  bool close() {
    levels_.pop_back();
    return true;
  }
  std::vector<Level> levels_;
  std::string too_deep_, duplicate_, error_;
};

// `text` as JSON. UsageError otherwise: "<what> is not valid JSON: parse error at line 2, column
// 1: ..."; "<what>: the value at 'entries[0]...' is nested deeper than 64 levels ..."; a key
// given twice in one object: "<what>: 'links.intra_gbps' is given twice".
inline nlohmann::json parse_json_file(const std::string& text, const std::string& what) {
  JsonFileChecks checks;
  nlohmann::json::sax_parse(text, &checks);
  if (!checks.too_deep().empty())
    throw UsageError(what + ": the value at " + quote(checks.too_deep()) + " is nested deeper than " +
                     std::to_string(kMaxJsonDepth) + " levels (the limit of collmm's input files)");
  if (!checks.error().empty()) throw UsageError(what + " is not valid JSON: " + checks.error());
  if (!checks.duplicate().empty()) throw UsageError(what + ": " + quote(checks.duplicate()) + " is given twice");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(what + " is not valid JSON: " + cut(json_error_text(e), 200));
  }
}

// A value for a message, never its whole text: a list or an object by its size, anything else
// printed and cut short.
inline std::string json_brief(const nlohmann::json& v) {
  if (v.is_object()) return "an object of " + std::to_string(v.size()) + " field(s)";
  if (v.is_array()) return "a list of " + std::to_string(v.size()) + " value(s)";
  return cut(v.dump(), 60);
}

// j[key] as text, or as a number; UsageError naming the key where it holds another type
// ("\"dtype\": 3 is not a name"). An absent key is nlohmann's error ("key 'dtype' not found").
inline std::string json_string(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_string()) throw UsageError(std::string("\"") + key + "\": " + json_brief(v) + " is not a name");
  return v.get<std::string>();
}
inline double json_double(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_number()) throw UsageError(std::string("\"") + key + "\": " + json_brief(v) + " is not a number");
  return v.get<double>();
}

}  // namespace collmm
