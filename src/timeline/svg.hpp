// svg.hpp: one iteration's Timeline (measured or predicted) as an SVG picture that opens in
// a browser. It has a row per rank and lane ("r comm": sendrecv, collectives, adds and copies;
// "r gemm": GEMMs, "r gemm L" when there are several GEMM lanes). One box per executed step is
// coloured by kind, with its chunk number on it where the box is wide enough to hold it. Every box
// also carries a hover <title> with kind, step, chunk and times. Then a legend, a time axis in
// microseconds with ticks, and a title naming op, algorithm and P. The same data as the Chrome
// trace (collmm/chrome_trace.hpp).
//
// Entry points for the front ends:
//   void write_svg(const Timeline&, const std::string& path, const SvgOptions& = {});
//   std::string timeline_svg(const Timeline&, const SvgOptions& = {});
//
// Every step box is a <rect class="step" ...>; legend swatches are <rect class="legend" ...>.
#pragma once

#include <string>

#include "collmm/timeline.hpp"

namespace collmm {

struct SvgOptions {
  int max_ranks = 0;       // draw ranks 0..max_ranks-1 only (0: all); the title says so
  double width_px = 1200;  // the whole picture
  std::string subtitle;    // e.g. "predicted, h200-nvlink, M=8192 N=8192 K=8192 bf16"
};

std::string timeline_svg(const Timeline&, const SvgOptions& = {});
// Throws std::runtime_error when the file cannot be written.
void write_svg(const Timeline&, const std::string& path, const SvgOptions& = {});

}  // namespace collmm
