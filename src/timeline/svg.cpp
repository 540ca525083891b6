// svg.cpp: a Timeline drawn as SVG (layout described in src/timeline/svg.hpp).
#include "svg.hpp"

#include "atomic_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

namespace collmm {
namespace {

const StepKind kKinds[] = {StepKind::gemm,           StepKind::sendrecv, StepKind::allgather,
                           StepKind::reduce_scatter, StepKind::add,      StepKind::copy};

const char* colour(StepKind k) {
  switch (k) {
    case StepKind::gemm: return "#4e79a7";
    case StepKind::sendrecv: return "#f28e2b";
    case StepKind::allgather: return "#e15759";
    case StepKind::reduce_scatter: return "#76b7b2";
    case StepKind::add: return "#59a14f";
    case StepKind::copy: return "#b07aa1";
  }
  return "#999999";
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// A tick step of 1, 2 or 5 times a power of ten giving about `target` ticks over `span`.
double tick_step(double span, int target) {
  if (!(span > 0)) return 1;
  const double raw = span / target, p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

}  // namespace

std::string timeline_svg(const Timeline& t, const SvgOptions& opt) {
  const int shown = opt.max_ranks > 0 ? std::min(opt.max_ranks, t.world) : t.world;
  std::set<int> lanes;
  int gemm_lanes = 0;
  double t0 = 0, t1 = 0;
  bool first = true;
  for (const TimelineEvent& e : t.events) {
    if (e.rank >= shown) continue;
    lanes.insert(e.lane);
    t0 = first ? e.start_us : std::min(t0, e.start_us);
    t1 = first ? e.end_us : std::max(t1, e.end_us);
    first = false;
  }
  for (int l : lanes) gemm_lanes += l > 0;
  if (lanes.empty()) lanes.insert(0);
  const double span = t1 > t0 ? t1 - t0 : 1;

  const double left = 90, right = 20, row_h = 18, gap = 4, top = 62;
  const double plot_w = opt.width_px - left - right;
  std::map<std::pair<int, int>, double> row_y;  // (rank, lane) -> y
  double y = top;
  for (int r = 0; r < shown; ++r)
    for (int l : lanes) row_y[{r, l}] = y, y += row_h + gap;
  const double axis_y = y + 4, height = axis_y + 40;
  auto x_of = [&](double us) { return left + (us - t0) / span * plot_w; };

  std::ostringstream s;
  s << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(opt.width_px) << "\" height=\"" << num(height)
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
    << "<rect class=\"background\" x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  std::string title = to_string(t.op) + " " + to_string(t.algo) + ", P=" + std::to_string(t.world);
  if (shown < t.world) title += " (ranks 0-" + std::to_string(shown - 1) + " shown)";
  if (!opt.subtitle.empty()) title += " | " + opt.subtitle;
  s << "<text x=\"" << num(left) << "\" y=\"18\" font-size=\"14\" font-weight=\"bold\">" << escape(title)
    << "</text>\n";

  double lx = left;  // legend
  for (StepKind k : kKinds) {
    s << "<rect class=\"legend\" x=\"" << num(lx) << "\" y=\"30\" width=\"12\" height=\"12\" fill=\"" << colour(k)
      << "\"/><text x=\"" << num(lx + 16) << "\" y=\"40\">" << to_string(k) << "</text>\n";
    lx += 30 + 7.0 * to_string(k).size();
  }

  for (auto& [key, ry] : row_y) {  // row labels and guide lines
    const auto [r, l] = key;
    std::string label = std::to_string(r) + (l == 0 ? " comm" : " gemm");
    if (l > 0 && gemm_lanes > 1) label += " " + std::to_string(l);
    s << "<text x=\"" << num(left - 6) << "\" y=\"" << num(ry + row_h - 5) << "\" text-anchor=\"end\">" << label
      << "</text><line x1=\"" << num(left) << "\" y1=\"" << num(ry + row_h) << "\" x2=\"" << num(left + plot_w)
      << "\" y2=\"" << num(ry + row_h) << "\" stroke=\"#dddddd\"/>\n";
  }

  for (const TimelineEvent& e : t.events) {  // one box per executed step
    if (e.rank >= shown) continue;
    const double x = x_of(e.start_us), w = std::max(0.5, x_of(e.end_us) - x), ry = row_y[{e.rank, e.lane}];
    std::ostringstream tip;
    tip << "rank " << e.rank << " lane " << e.lane << " " << to_string(e.kind);
    if (e.index >= 0) tip << " step " << e.index;
    if (e.chunk >= 0) tip << " chunk " << e.chunk;
    tip << ": " << num(e.start_us) << " - " << num(e.end_us) << " us";
    s << "<rect class=\"step\" x=\"" << num(x) << "\" y=\"" << num(ry) << "\" width=\"" << num(w) << "\" height=\""
      << num(row_h) << "\" fill=\"" << colour(e.kind) << "\" stroke=\"white\" "
      << "stroke-width=\"0.5\"><title>" << escape(tip.str()) << "</title></rect>";
    const std::string chunk = std::to_string(e.chunk);
    if (e.chunk >= 0 && w >= 7.0 * chunk.size() + 3)
      s << "<text class=\"chunk\" x=\"" << num(x + w / 2) << "\" y=\"" << num(ry + row_h - 5)
        << "\" text-anchor=\"middle\" fill=\"white\">" << chunk << "</text>";
    s << "\n";
  }

  s << "<line x1=\"" << num(left) << "\" y1=\"" << num(axis_y) << "\" x2=\"" << num(left + plot_w) << "\" y2=\""
    << num(axis_y) << "\" stroke=\"black\"/>\n";
  const double step = tick_step(span, 10);
  for (double v = std::ceil(t0 / step) * step; v <= t1 + 1e-9 * span; v += step) {
    const double x = x_of(v);
    s << "<line x1=\"" << num(x) << "\" y1=\"" << num(axis_y) << "\" x2=\"" << num(x) << "\" y2=\"" << num(axis_y + 5)
      << "\" stroke=\"black\"/><text x=\"" << num(x) << "\" y=\"" << num(axis_y + 17) << "\" text-anchor=\"middle\">"
      << num(v).substr(0, num(v).find('.') + (step < 1 ? 3 : 0)) << "</text>\n";
  }
  s << "<text x=\"" << num(left + plot_w) << "\" y=\"" << num(axis_y + 32)
    << "\" text-anchor=\"end\">time (us)</text>\n";
  s << "</svg>\n";
  return s.str();
}

void write_svg(const Timeline& t, const std::string& path, const SvgOptions& opt) {
  write_file_atomically(path, timeline_svg(t, opt));
}

}  // namespace collmm
