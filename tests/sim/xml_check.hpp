// xml_check.hpp: a small tag-matching reader that says whether an SVG (XML) document is
// well-formed; shared by the SVG tests here and collmm-bench's --timeline test (tests/cli).
#pragma once

#include <string>
#include <vector>

namespace collmm {

// Tag balance of an XML document: every opened element closed in order, attribute values quoted,
// no stray '<' or '&' in text. Returns "" when well-formed, else what is wrong.
inline std::string xml_problem(const std::string& s) {
  std::vector<std::string> open;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '&') {
      const size_t semi = s.find(';', i);
      if (semi == std::string::npos || semi - i > 6) return "bare & at " + std::to_string(i);
      i = semi + 1;
      continue;
    }
    if (s[i] != '<') {
      ++i;
      continue;
    }
    size_t j = i + 1;
    bool in_quote = false;
    while (j < s.size() && (in_quote || s[j] != '>')) {
      if (s[j] == '"') in_quote = !in_quote;
      if (!in_quote && s[j] == '<') return "'<' inside a tag at " + std::to_string(j);
      ++j;
    }
    if (j >= s.size()) return "unterminated tag at " + std::to_string(i);
    const std::string tag = s.substr(i + 1, j - i - 1);
    i = j + 1;
    if (tag.empty()) return "empty tag";
    if (tag[0] == '?' || tag[0] == '!') continue;
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) return "closing </" + name + "> does not match";
      open.pop_back();
      continue;
    }
    if (tag.back() == '/') continue;
    open.push_back(tag.substr(0, tag.find_first_of(" \t\n")));
  }
  return open.empty() ? "" : "unclosed <" + open.back() + ">";
}

}  // namespace collmm
