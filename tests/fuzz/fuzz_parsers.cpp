// fuzz_parsers.cpp: a libFuzzer target (clang -fsanitize=fuzzer,address,undefined) for the parsers
// of user input: the size parser (collmm/sizes.hpp), cost-model profiles (profile_from_json) and
// the tuning cache (parse_tuning_cache). COLLMM_FUZZ=size|profile|tuning picks the parser. Each may
// refuse its input only with UsageError; any other exception, a crash or a sanitizer report is a
// finding. tests/fuzz/CMakeLists.txt runs each for a few seconds on its seed corpus.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "collmm/sizes.hpp"
#include "profile_json.hpp"
#include "tuning.hpp"

namespace {

enum class Target { size, profile, tuning };
Target g_target = Target::size;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* t = std::getenv("COLLMM_FUZZ");
  const std::string name = t ? t : "";
  if (name == "size")
    g_target = Target::size;
  else if (name == "profile")
    g_target = Target::profile;
  else if (name == "tuning")
    g_target = Target::tuning;
  else {
    std::fprintf(stderr, "set COLLMM_FUZZ=size|profile|tuning\n");
    std::exit(2);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    switch (g_target) {
      case Target::size: {
        const int64_t v = collmm::parse_size(text);
        if (v < 0 || v > collmm::kMaxSize) std::abort();  // the bound it promises
        break;
      }
      case Target::profile: {
        const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
        if (!j.is_discarded()) collmm::profile_from_json(j);
        break;
      }
      case Target::tuning: {
        const collmm::TuningCache c = collmm::parse_tuning_cache(text, "fuzz.json");
        for (const collmm::TuningEntry& e : c.entries)
          if (e.options.gemm_lanes < 1 || e.options.gemm_lanes > collmm::kMaxGemmLanes || e.problem.world < 1)
            std::abort();
        break;
      }
    }
  } catch (const collmm::UsageError&) {
    // refused with a message: what a parser of user input must do
  }
  return 0;
}
