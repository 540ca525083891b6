// tools/common/cli_range.hpp: the CLI11 check of an integer option that both command lines
// (collmm-bench, collmm-sim) use, so that a value out of range is refused with the same message:
// "--stages: must be an integer >= 1 (got 0)".
#pragma once

#include <CLI/CLI.hpp>

#include <climits>
#include <string>

namespace collmm {

// An integer lo..hi (hi: the type's own bound when not given), checked on the text, so that a
// value too large for the type is refused with the range rather than a conversion error.
inline CLI::Validator in_range(long long lo, long long hi = INT_MAX) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        try {
          size_t used = 0;
          const long long v = std::stoll(s, &used);
          if (v >= lo && v <= hi && used == s.size()) return "";
        } catch (const std::exception&) {
        }
        const std::string range =
            hi == INT_MAX ? ">= " + std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi);
        return "must be an integer " + range + " (got " + s + ")";
      },
      hi == INT_MAX ? "INT>=" + std::to_string(lo) : "INT " + std::to_string(lo) + ".." + std::to_string(hi));
}
inline CLI::Validator at_least(long long lo) { return in_range(lo); }

}  // namespace collmm
