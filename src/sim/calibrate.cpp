// calibrate.cpp: GEMM rate table, link, collective, memory, host issue and contention figures
// fitted to a backend's measured times (src/sim/calibrate.hpp).
#include "calibrate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "collmm/sim.hpp"
#include "host_issue.hpp"

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

// fit_issue: the least spread (sin^2 of the angle between the GEMM and other counts over the
// samples) at which the two costs are told apart.
constexpr double kIssueMixSpread = 1e-2;

constexpr double kFlatGbps = 1e6;  // "size does not matter here": 1 PB/s

struct Line {
  double latency_us = 0, gbps = 0;
};

void check_positive(const std::vector<double>& us, const char* what) {
  for (double t : us)
    if (!(t > 0)) throw std::runtime_error(std::string("calibration: ") + what + " timer gave a non-positive time");
}

// Least-squares slope of t against the size; NaN with fewer than two different sizes.
double slope_of(const std::vector<double>& sizes, const std::vector<double>& us) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const double n = double(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i)
    sx += sizes[i], sy += us[i], sxx += sizes[i] * sizes[i], sxy += sizes[i] * us[i];
  const double den = n * sxx - sx * sx;
  return den > 0 ? (n * sxy - sx * sy) / den : std::nan("");
}

// Least squares t = latency + bytes / bw over the sizes; the latency is clipped at 0. flat_ok: times
// that do not grow with the size (what is left once the host's issue cost is taken off a transfer
// the host, not the device, paced) give latency = their mean and a bandwidth that costs nothing.
Line fit_line(const std::vector<double>& sizes, const std::vector<double>& us, const std::string& what, bool flat_ok) {
  check_positive(us, what.c_str());
  const double slope = slope_of(sizes, us);
  if (std::isnan(slope)) throw UsageError("calibration needs at least two different " + what + " sizes");
  double sx = 0, sy = 0;
  for (size_t i = 0; i < sizes.size(); ++i) sx += sizes[i], sy += us[i];
  const double n = double(sizes.size()), intercept = (sy - slope * sx) / n;
  if (!(slope > 0) && flat_ok) return {sy / n, kFlatGbps};
  if (!(slope > 0)) {
    std::string times;
    for (size_t i = 0; i < sizes.size(); ++i) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%s%.0f bytes %.1f us", i ? ", " : "", sizes[i], us[i]);
      times += buf;
    }
    throw std::runtime_error("calibration: " + what + " times do not grow with the size (" + times +
                             "; each size's least over " + std::to_string(kCalibrationRounds) +
                             " rounds): the machine is too loaded or noisy to calibrate; calibrate on an idle machine");
  }
  return {std::max(0.0, intercept), 1.0 / slope / 1e3};  // bytes per us -> GB/s
}

// A library collective's per-step line over the part sizes, and its measured points, each capped
// by the next larger size's time: a smaller part cannot take longer than a larger one, so a slower
// small size is noise (seen on the 2-core machine: 64 KiB parts 4.0 ms, 1 MiB parts 1.5 ms).
CollectiveCost fit_collective(const CalibrationSpec& spec, const std::vector<double>& us, const char* what,
                              bool flat_ok) {
  std::vector<double> step_us;
  std::map<double, double> points;  // part bytes -> us per ring step
  for (size_t i = 0; i < us.size(); ++i) {
    step_us.push_back(us[i] / double(spec.world - 1));
    points[spec.collective_bytes[i]] = step_us.back();
  }
  const Line l = fit_line(spec.collective_bytes, step_us, std::string(what) + " (per ring step)", flat_ok);
  std::vector<std::pair<double, double>> kept(points.begin(), points.end());
  for (size_t i = kept.size(); i-- > 1;) kept[i - 1].second = std::min(kept[i - 1].second, kept[i].second);
  return {l.gbps, l.latency_us, kept};
}

bool collectives_asked(const CalibrationSpec& spec) {
  return !spec.comm_bytes.empty() && !spec.collective_bytes.empty() && spec.world > 1;
}

}  // namespace

bool flat_times_ok(const CalibrationSpec& spec, const HostCost& measured) {
  return (measured.issue_us > 0 ? measured.issue_us : spec.base.host.issue_us) > 0;
}

CalibrationTimes measure(const CalibrationSpec& spec, const GemmTimer& gemm, const CommTimer& comm,
                         const CollectiveTimer& coll, const AddTimer& add, const IssueTimer& issue,
                         const RoundHook& again) {
  if (spec.gemm_shapes.empty()) throw UsageError("calibration needs at least one GEMM shape");
  if (spec.comm_bytes.size() == 1) throw UsageError("calibration needs at least two message sizes (or none)");
  if (coll && collectives_asked(spec) && spec.collective_bytes.size() < 2)
    throw UsageError("calibration needs at least two collective sizes (or none)");
  CalibrationTimes t;
  for (const GemmShape& s : spec.gemm_shapes) t.gemm_us.push_back(gemm(s[0], s[1], s[2]));
  if (issue) t.host = issue();
  if (spec.comm_bytes.empty()) return t;  // one rank: no link to time
  // A series whose times do not grow with the size is timed again; each size keeps its least time.
  const bool flat_ok = flat_times_ok(spec, t.host);
  auto series = [&](const char* what, const std::vector<double>& sizes, const std::function<double(double)>& time) {
    std::vector<double> us;
    if (again) again(what, 1);
    for (double bytes : sizes) us.push_back(time(bytes));
    for (int round = 2; round <= kCalibrationRounds && !flat_ok && slope_of(sizes, us) <= 0; ++round) {
      if (again) again(what, round);
      for (size_t i = 0; i < sizes.size(); ++i) us[i] = std::min(us[i], time(sizes[i]));
    }
    return us;
  };
  t.comm_us = series("message", spec.comm_bytes, comm);
  if (coll && collectives_asked(spec)) {
    t.allgather_us = series("allgather", spec.collective_bytes, [&](double b) { return coll(StepKind::allgather, b); });
    t.reduce_scatter_us =
        series("reduce_scatter", spec.collective_bytes, [&](double b) { return coll(StepKind::reduce_scatter, b); });
  }
  if (add)
    for (double bytes : spec.add_bytes) t.add_us.push_back(add(bytes));
  return t;
}

Profile fit_profile(const CalibrationSpec& spec, const CalibrationTimes& t) {
  if (spec.gemm_shapes.empty() || t.gemm_us.size() != spec.gemm_shapes.size())
    throw UsageError("calibration needs one GEMM time per shape (at least one shape)");
  if (spec.comm_bytes.size() == 1) throw UsageError("calibration needs at least two message sizes (or none)");
  Profile p = spec.base;
  p.name = spec.name;
  p.gemm.model = GemmModel::table;
  p.gemm.overhead_us = 0;
  p.gemm.table.erase(std::remove_if(p.gemm.table.begin(), p.gemm.table.end(),
                                    [&](const GemmPoint& g) { return g.dtype == spec.dtype; }),
                     p.gemm.table.end());
  check_positive(t.gemm_us, "GEMM");
  double best = 0;
  for (size_t i = 0; i < spec.gemm_shapes.size(); ++i) {
    const GemmShape& s = spec.gemm_shapes[i];
    const double tflops = 2.0 * double(s[0]) * double(s[1]) * double(s[2]) / (t.gemm_us[i] * 1e6);
    p.gemm.table.push_back({spec.dtype, s[0], s[1], s[2], tflops});
    best = std::max(best, tflops);
  }
  auto& peaks = p.gemm.peak_tflops;
  peaks.erase(std::remove_if(peaks.begin(), peaks.end(), [&](auto& e) { return e.first == spec.dtype; }), peaks.end());
  peaks.push_back({spec.dtype, best});
  p.notes = "Calibrated: GEMM rate table (" + to_string(spec.dtype) + ", " + std::to_string(spec.gemm_shapes.size()) +
            " shapes) measured; ";

  const HostCost& h = t.host;
  if (!(h.issue_us >= 0 && h.gemm_issue_us >= 0) || !std::isfinite(h.issue_us) || !std::isfinite(h.gemm_issue_us))
    throw std::runtime_error("calibration: issue timer gave a negative time");
  if (h.issue_us > 0) {
    p.host = {h.issue_us, spec.shared_issuer, h.gemm_issue_us};
    p.notes += std::string("host issue cost measured (one host thread ") +
               (spec.shared_issuer ? "for every rank" : "per rank") + "); ";
  }
  if (spec.comm_bytes.empty()) {  // one rank: no link to time
    p.notes += "links and the rest from '" + spec.base.name + "'.";
    return p;
  }

  const bool flat_ok = flat_times_ok(spec, t.host);
  if (t.comm_us.size() != spec.comm_bytes.size()) throw UsageError("calibration needs one time per message size");
  const Line link = fit_line(spec.comm_bytes, t.comm_us, "message", flat_ok);
  p.links.intra_gbps = link.gbps;
  p.links.intra_latency_us = link.latency_us;
  if (p.links.ranks_per_node == 0) {
    p.links.inter_gbps = p.links.intra_gbps;
    p.links.inter_latency_us = p.links.intra_latency_us;
  }
  p.notes += "link fit (" + std::to_string(spec.comm_bytes.size()) + " sizes) measured; ";

  if (collectives_asked(spec) && !t.allgather_us.empty()) {
    if (spec.collective_bytes.size() < 2) throw UsageError("calibration needs at least two collective sizes (or none)");
    if (t.allgather_us.size() != spec.collective_bytes.size() ||
        t.reduce_scatter_us.size() != spec.collective_bytes.size())
      throw UsageError("calibration needs one time per collective size");
    p.allgather = fit_collective(spec, t.allgather_us, "allgather", flat_ok);
    p.reduce_scatter = fit_collective(spec, t.reduce_scatter_us, "reduce_scatter", flat_ok);
    p.notes += "allgather and reduce-scatter measured as the library runs them (" +
               std::to_string(spec.collective_bytes.size()) + " sizes); ";
  }
  if (!spec.add_bytes.empty() && !t.add_us.empty()) {
    if (t.add_us.size() != spec.add_bytes.size()) throw UsageError("calibration needs one time per add size");
    check_positive(t.add_us, "add");
    double sxx = 0, sxy = 0;  // t = x / bw through 0, x = 3 * bytes
    for (size_t i = 0; i < spec.add_bytes.size(); ++i) {
      const double bytes = spec.add_bytes[i];
      if (!(bytes > 0)) throw UsageError("calibration: add sizes must be > 0 bytes");
      sxx += 9 * bytes * bytes, sxy += 3 * bytes * t.add_us[i];
    }
    p.memory_gbps = sxx / sxy / 1e3;
    p.notes += "memory bandwidth from timed adds (" + std::to_string(spec.add_bytes.size()) + " sizes); ";
  }
  p.notes += "the rest from '" + spec.base.name + "'.";
  return p;
}

Profile calibrate(const CalibrationSpec& spec, const GemmTimer& gemm, const CommTimer& comm,
                  const CollectiveTimer& coll, const AddTimer& add, const IssueTimer& issue) {
  return fit_profile(spec, measure(spec, gemm, comm, coll, add, issue));
}

Profile calibrate_to_file(const CalibrationSpec& spec, const GemmTimer& gemm, const CommTimer& comm,
                          const std::string& path, const CollectiveTimer& coll, const AddTimer& add,
                          const IssueTimer& issue) {
  Profile p = calibrate(spec, gemm, comm, coll, add, issue);
  save_profile(p, path);
  return p;
}

IssueSample issue_counts(const std::vector<Plan>& plans, int world, bool single_issuer) {
  IssueSample total;
  for (const Plan& plan : plans) {
    double g = 0, n = 0;
    for (const Step& s : plan.steps)
      (s.kind == StepKind::gemm ? g : n) += issue_ops(s.kind, static_cast<int>(s.recvs.size()), world);
    if (single_issuer)
      total.gemms += g, total.others += n;
    else if (g + n > total.gemms + total.others)
      total.gemms = g, total.others = n;
  }
  return total;
}

HostCost fit_issue(const std::vector<IssueSample>& samples) {
  double sgg = 0, sgo = 0, soo = 0, sgt = 0, sot = 0, wall = 0, ops = 0;  // the normal equations' sums
  for (const IssueSample& s : samples) {
    sgg += s.gemms * s.gemms, sgo += s.gemms * s.others, soo += s.others * s.others;
    sgt += s.gemms * s.us, sot += s.others * s.us;
    wall += s.us, ops += s.gemms + s.others;
  }
  HostCost h;
  // det / (sgg soo) = sin^2 of the angle between the GEMM and other counts over the samples: mixes
  // nearly proportional (one algorithm in several --pieces) cannot tell the two costs apart.
  const double det = sgg * soo - sgo * sgo;
  if (det > kIssueMixSpread * sgg * soo) {
    h.gemm_issue_us = (sgt * soo - sot * sgo) / det;
    h.issue_us = (sot * sgg - sgt * sgo) / det;
  }
  if (!(h.gemm_issue_us > 0 && h.issue_us > 0)) h = {ops > 0 ? wall / ops : 0, false, 0};
  return h;
}

double fit_contention(const Profile& base, const Problem& p, const PlanOptions& ring, Dtype dtype, double measured_us) {
  Profile prof = base;
  auto predicted = [&](double s) {
    prof.contention = {true, s, s, base.contention.launch_order};
    return simulate(p, ring, dtype, prof, StepFilter::all, false).time_us;
  };
  double lo = 1, hi = 16;
  if (predicted(lo) >= measured_us) return lo;
  if (predicted(hi) <= measured_us) return hi;
  for (int i = 0; i < 30; ++i) {
    const double mid = 0.5 * (lo + hi);
    (predicted(mid) < measured_us ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

}  // namespace collmm
