// sizes.cpp: parse_size (collmm/sizes.hpp).
#include "collmm/sizes.hpp"

#include <cctype>

#include "collmm/types.hpp"

namespace collmm {

int64_t parse_size(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return UsageError("size '" + text + "': " + why + " (a count, optionally with K, M, G or T: 8K = 8192)");
  };
  size_t i = 0;
  int64_t value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    value = value * 10 + (text[i] - '0');
    if (value > kMaxSize) throw bad("more than " + std::to_string(kMaxSize));
    ++i;
  }
  if (i == 0) throw bad("not a number");
  int shift = 0;
  if (i < text.size()) {
    switch (std::toupper(static_cast<unsigned char>(text[i]))) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      case 'T': shift = 40; break;
      default: throw bad("unknown suffix");
    }
    if (++i != text.size()) throw bad("unknown suffix");
  }
  if (value > (kMaxSize >> shift)) throw bad("more than " + std::to_string(kMaxSize));
  return value << shift;
}

}  // namespace collmm
