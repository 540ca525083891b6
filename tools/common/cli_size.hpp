// tools/common/cli_size.hpp: the CLI11 transform that both command lines (collmm-bench, collmm-sim) use for
// -m, -n and -k: collmm::parse_size (collmm/sizes.hpp), so "8K" means 8192 in both and a bad or
// too large size is refused with the same message.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "collmm/sizes.hpp"
#include "collmm/types.hpp"

namespace collmm {

inline CLI::Validator size_transform() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        try {
          s = std::to_string(parse_size(s));
          return "";
        } catch (const UsageError& e) {
          return e.what();
        }
      },
      "SIZE");
}

}  // namespace collmm
