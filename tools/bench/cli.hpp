// cli.hpp: collmm-bench's command line (CLI11) -> BenchOptions.
#pragma once

#include <CLI/CLI.hpp>

#include "bench_options.hpp"

namespace collmm {

// Parses argv into options. Throws CLI::ParseError (including --help, whose exit code is 0) or
// UsageError (an unknown op, algorithm, dtype, posting order or B layout; a cuda option with
// --backend cpu).
BenchOptions parse_bench_cli(int argc, char** argv, CLI::App& app);

}  // namespace collmm
