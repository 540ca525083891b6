// calibrate.cpp: GEMM rate table, link, collective, memory and host issue figures from a backend's
// timers (collmm/calibrate.hpp).
#include "collmm/calibrate.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace collmm {

std::vector<GemmShape> calibration_shapes(int64_t L) {
  L = std::max<int64_t>(L, 8);
  std::vector<GemmShape> out;
  for (int64_t m : {L / 8, L / 2, L})
    for (GemmShape nk : {GemmShape{0, L, L}, GemmShape{0, L / 2, L}}) out.push_back({m, nk[1], nk[2]});
  return out;
}

std::vector<double> calibration_sizes(double largest) {
  std::vector<double> out;
  for (double b = 64 * 1024; b <= largest; b *= 16) out.push_back(b);
  return out;
}

namespace {

constexpr double kFlatGbps = 1e6;  // "size does not matter here": 1 PB/s

struct Line {
  double latency_us = 0, gbps = 0;
};

// Least squares t = latency + bytes / bw over the sizes; the latency is clipped at 0. flat_ok: times
// that do not grow with the size (what is left once the host's issue cost is taken off a transfer
// the host, not the device, paced) give latency = their mean and a bandwidth that costs nothing.
Line fit_line(const std::vector<double>& sizes, const std::function<double(double)>& timer, const char* what,
              bool flat_ok = false) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const double n = double(sizes.size());
  for (double bytes : sizes) {
    const double us = timer(bytes);
    if (!(us > 0)) throw std::runtime_error(std::string("calibration: ") + what + " timer gave a non-positive time");
    sx += bytes, sy += us, sxx += bytes * bytes, sxy += bytes * us;
  }
  const double den = n * sxx - sx * sx;
  if (!(den > 0)) throw UsageError(std::string("calibration needs at least two different ") + what + " sizes");
  const double slope = (n * sxy - sx * sy) / den, intercept = (sy - slope * sx) / n;
  if (!(slope > 0) && flat_ok) return {sy / n, kFlatGbps};
  if (!(slope > 0)) throw std::runtime_error(std::string("calibration: ") + what + " times do not grow with the size");
  return {std::max(0.0, intercept), 1.0 / slope / 1e3};  // bytes per us -> GB/s
}

}  // namespace

Profile calibrate(const CalibrationSpec& spec, const GemmTimer& gemm, const CommTimer& comm,
                  const CollectiveTimer& coll, const AddTimer& add, const IssueTimer& issue,
                  const GemmTimer& gemm_device) {
  if (spec.gemm_shapes.empty()) throw UsageError("calibration needs at least one GEMM shape");
  if (spec.comm_bytes.size() == 1) throw UsageError("calibration needs at least two message sizes (or none)");
  Profile p = spec.base;
  p.name = spec.name;
  p.gemm.model = GemmModel::table;
  p.gemm.overhead_us = 0;
  p.gemm.table.erase(std::remove_if(p.gemm.table.begin(), p.gemm.table.end(),
                                    [&](const GemmPoint& g) { return g.dtype == spec.dtype; }),
                     p.gemm.table.end());
  const bool shared_device = spec.ranks_per_device > 1 && gemm_device;
  p.ranks_per_device = shared_device ? spec.ranks_per_device : 1;
  double best = 0;
  for (const GemmShape& s : spec.gemm_shapes) {
    const double flops = 2.0 * double(s[0]) * double(s[1]) * double(s[2]);
    const double us = gemm(s[0], s[1], s[2]);
    if (!(us > 0)) throw std::runtime_error("calibration: GEMM timer gave a non-positive time");
    double device = 0;
    if (shared_device) {
      const double all_us = gemm_device(s[0], s[1], s[2]);
      if (!(all_us > 0)) throw std::runtime_error("calibration: device GEMM timer gave a non-positive time");
      device = spec.ranks_per_device * flops / (all_us * 1e6);
    }
    p.gemm.table.push_back({spec.dtype, s[0], s[1], s[2], flops / (us * 1e6), device});
    best = std::max(best, flops / (us * 1e6));
  }
  auto& peaks = p.gemm.peak_tflops;
  peaks.erase(std::remove_if(peaks.begin(), peaks.end(), [&](auto& e) { return e.first == spec.dtype; }), peaks.end());
  peaks.push_back({spec.dtype, best});

  p.notes = "Calibrated: GEMM rate table (" + to_string(spec.dtype) + ", " + std::to_string(spec.gemm_shapes.size()) +
            " shapes) measured" +
            (shared_device ? " alone and with all " + std::to_string(spec.ranks_per_device) + " ranks of the device at once; "
                           : "; ");
  if (issue) {
    const HostCost h = issue();
    if (!(h.issue_us >= 0 && h.gemm_issue_us >= 0) || !std::isfinite(h.issue_us) || !std::isfinite(h.gemm_issue_us))
      throw std::runtime_error("calibration: issue timer gave a negative time");
    if (h.issue_us > 0) {
      p.host = {h.issue_us, spec.shared_issuer, h.gemm_issue_us};
      p.notes += std::string("host issue cost measured (one host thread ") +
                 (spec.shared_issuer ? "for every rank" : "per rank") + "); ";
    }
  }
  if (spec.comm_bytes.empty()) {  // one rank: no link to time
    p.notes += "links and the rest from '" + spec.base.name + "'.";
    return p;
  }

  const bool flat_ok = p.host.issue_us > 0;  // the timers then return the device's share only
  const Line link = fit_line(spec.comm_bytes, comm, "message", flat_ok);
  p.links.intra_gbps = link.gbps;
  p.links.intra_latency_us = link.latency_us;
  if (p.links.ranks_per_node == 0) {
    p.links.inter_gbps = p.links.intra_gbps;
    p.links.inter_latency_us = p.links.intra_latency_us;
  }
  p.notes += "link fit (" + std::to_string(spec.comm_bytes.size()) + " sizes) measured; ";

  if (coll && !spec.collective_bytes.empty() && spec.world > 1) {
    if (spec.collective_bytes.size() < 2) throw UsageError("calibration needs at least two collective sizes (or none)");
    for (auto [kind, cost] : {std::pair<StepKind, CollectiveCost*>{StepKind::allgather, &p.allgather},
                              {StepKind::reduce_scatter, &p.reduce_scatter}}) {
      std::map<double, double> points;  // part bytes -> us per ring step
      const Line l = fit_line(spec.collective_bytes,
                              [&](double bytes) { return points[bytes] = coll(kind, bytes) / double(spec.world - 1); },
                              "collective", flat_ok);
      // A smaller part cannot take longer than a larger one: a slower small size is noise (seen
      // on the 2-core machine: 64 KiB parts 4.0 ms, 1 MiB parts 1.5 ms), so each point is capped
      // by the next larger one's time.
      std::vector<std::pair<double, double>> kept(points.begin(), points.end());
      for (size_t i = kept.size(); i-- > 1;) kept[i - 1].second = std::min(kept[i - 1].second, kept[i].second);
      *cost = {l.gbps, l.latency_us, kept};
    }
    p.notes += "allgather and reduce-scatter measured as the library runs them (" +
               std::to_string(spec.collective_bytes.size()) + " sizes); ";
  }
  if (add && !spec.add_bytes.empty()) {
    double sxx = 0, sxy = 0;  // t = x / bw through 0, x = 3 * bytes
    for (double bytes : spec.add_bytes) {
      const double us = add(bytes);
      if (!(us > 0)) throw std::runtime_error("calibration: add timer gave a non-positive time");
      if (!(bytes > 0)) throw UsageError("calibration: add sizes must be > 0 bytes");
      sxx += 9 * bytes * bytes, sxy += 3 * bytes * us;
    }
    p.memory_gbps = sxx / sxy / 1e3;
    p.notes += "memory bandwidth from timed adds (" + std::to_string(spec.add_bytes.size()) + " sizes); ";
  }
  p.notes += "the rest from '" + spec.base.name + "'.";
  return p;
}

Profile calibrate_to_file(const CalibrationSpec& spec, const GemmTimer& gemm, const CommTimer& comm,
                          const std::string& path, const CollectiveTimer& coll, const AddTimer& add,
                          const IssueTimer& issue, const GemmTimer& gemm_device) {
  Profile p = calibrate(spec, gemm, comm, coll, add, issue, gemm_device);
  save_profile(p, path);
  return p;
}

}  // namespace collmm
