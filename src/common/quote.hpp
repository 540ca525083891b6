// quote.hpp: a path or a value a user gave, made safe to put into a message: in single quotes,
// with a newline, a tab, any other control character, a quote and a backslash written as escapes
// (\n, \t, \x1b, \', \\). So no file name can start a line of its own in collmm's output, and
// a long value is cut short (cut) instead of filling the terminal.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace collmm {

// 'text' with escapes, e.g. quote("d/x\ncollmm: ok") == "'d/x\\ncollmm: ok'".
inline std::string quote(std::string_view text) {
  std::string out = "'";
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\'' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += ch;
    }
  }
  return out + "'";
}

// A message made one line: its control characters (a newline, an escape) written as \n, \x1b.
// The front ends print every error through it, so that a value quoted nowhere (a name in a
// message built elsewhere) still cannot start a line. Backslashes are kept as they are.
inline std::string one_line(std::string_view text) {
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c != 0x7f) {
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out;
}

// `text` cut to its first `limit` characters, "..." and the count of the rest after them.
inline std::string cut(std::string_view text, size_t limit = 80) {
  if (text.size() <= limit) return std::string(text);
  return std::string(text.substr(0, limit)) + "... (" + std::to_string(text.size() - limit) + " more characters)";
}

}  // namespace collmm
