// cost_model.cpp: the times the cost model gives for a GEMM, a copy or add, one message and a ring
// collective (the formulas are in src/sim/cost_model.hpp).
#include "cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace collmm {
namespace {

// GB/s -> bytes per microsecond.
double bytes_per_us(double gbps) { return gbps * 1e3; }

double transfer_us(double bytes, double gbps) {
  if (bytes <= 0) return 0;
  if (!(gbps > 0)) throw UsageError("cost model: a bandwidth of the profile is not set (> 0 GB/s needed)");
  return bytes / bytes_per_us(gbps);
}

double peak_tflops(const Profile& prof, Dtype d) {
  for (auto& [dt, tf] : prof.gemm.peak_tflops)
    if (dt == d) return tf;
  throw UsageError("profile '" + prof.name + "' has no GEMM peak for dtype " + to_string(d) + " (gemm.peak_tflops." +
                   to_string(d) + ")");
}

// Inverse-distance weighting (power 2) of the table's rates for dtype d in log2 coordinates; 0
// when the table has no point for d.
double interpolate(const Profile& prof, int64_t m, int64_t n, int64_t k, Dtype d) {
  const double x[3] = {std::log2(double(m)), std::log2(double(n)), std::log2(double(k))};
  double wsum = 0, rsum = 0;
  for (const GemmPoint& p : prof.gemm.table) {
    const double rate = p.tflops;
    if (p.dtype != d || !(rate > 0)) continue;
    const double y[3] = {std::log2(double(p.m)), std::log2(double(p.n)), std::log2(double(p.k))};
    double dist2 = 0;
    for (int i = 0; i < 3; ++i) dist2 += (x[i] - y[i]) * (x[i] - y[i]);
    if (dist2 < 1e-18) return rate;
    const double w = 1.0 / dist2;
    wsum += w;
    rsum += w * rate;
  }
  return wsum > 0 ? rsum / wsum : 0;
}

double table_tflops(const Profile& prof, int64_t m, int64_t n, int64_t k, Dtype d) {
  const double r = interpolate(prof, m, n, k, d);
  return r > 0 ? r : peak_tflops(prof, d);  // no table row for this dtype: the roofline peak
}

}  // namespace

std::string to_string(GemmModel g) { return g == GemmModel::table ? "table" : "roofline"; }
GemmModel parse_gemm_model(const std::string& s) {
  if (s == "table") return GemmModel::table;
  if (s == "roofline") return GemmModel::roofline;
  throw UsageError("unknown GEMM model '" + s + "' (expected table or roofline)");
}

double gemm_rate_tflops(const Profile& prof, int64_t m, int64_t n, int64_t k, Dtype in) {
  const double rate = prof.gemm.model == GemmModel::table ? table_tflops(prof, m, n, k, in) : peak_tflops(prof, in);
  if (!(rate > 0)) throw UsageError("profile '" + prof.name + "': GEMM rate must be > 0");
  return rate;
}

void check_gemm_rate(const Profile& prof, Dtype in) {
  if (prof.gemm.model == GemmModel::table && interpolate(prof, 1, 1, 1, in) > 0) return;
  for (auto& [dt, tf] : prof.gemm.peak_tflops)
    if (dt == in) return;
  throw UsageError("missing field gemm.peak_tflops." + to_string(in) + ": the model has no GEMM rate for dtype " +
                   to_string(in) + (prof.gemm.model == GemmModel::table ? " (nor a gemm.table point of it)" : ""));
}

double gemm_time_us(const Profile& prof, int64_t m, int64_t n, int64_t k, Dtype in) {
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  const double flops = 2.0 * double(m) * double(n) * double(k);
  const double compute_us = flops / (gemm_rate_tflops(prof, m, n, k, in) * 1e6);
  double memory_us = 0;
  if (prof.memory_gbps > 0) {
    const double bytes = double(dtype_size(in)) * (double(m) * k + double(k) * n) +
                         double(dtype_size(output_dtype(prof.gemm.library, in))) * double(m) * n;
    memory_us = transfer_us(bytes, prof.memory_gbps);
  }
  return std::max(compute_us, memory_us) + prof.gemm.overhead_us;
}

double copy_time_us(const Profile& prof, double bytes) { return transfer_us(2 * bytes, prof.memory_gbps); }
double add_time_us(const Profile& prof, double bytes) { return transfer_us(3 * bytes, prof.memory_gbps); }
double add_after_receive_us(const Profile& prof, double bytes) {
  return add_time_us(prof, bytes) + prof.links.collective_step_us;
}

bool lowers_collectives(const Profile& prof) { return prof.links.collective_step_us > 0; }

bool same_node(const Profile& prof, int a, int b) {
  const int per = prof.links.ranks_per_node;
  return per <= 0 || a / per == b / per;
}

double message_time_us(const Profile& prof, int a, int b, double bytes, int share) {
  const bool intra = same_node(prof, a, b);
  const double gbps = intra ? prof.links.intra_gbps : prof.links.inter_gbps;
  const double lat = intra ? prof.links.intra_latency_us : prof.links.inter_latency_us;
  share = std::max(1, share);
  return (prof.links.serial_messages ? share : 1) * lat + transfer_us(bytes, gbps / share);
}

double collective_step_us(const CollectiveCost& c, double bytes) {
  const auto& pts = c.points;
  if (bytes <= pts.front().first) return pts.front().second;
  for (size_t i = 1; i < pts.size(); ++i)
    if (bytes <= pts[i].first) {
      const auto [b0, t0] = pts[i - 1];
      const auto [b1, t1] = pts[i];
      return t0 + (t1 - t0) * (bytes - b0) / (b1 - b0);
    }
  const double extra = bytes - pts.back().first;
  return pts.back().second + (c.gbps > 0 ? transfer_us(extra, c.gbps) : 0);
}

double collective_time_us(const Profile& prof, int world, double max_part_bytes, bool reduce) {
  // One rank: the collective copies its own part from input to output (NCCL, c10d and the host
  // executor do), so sequential is no cheaper than ring at P = 1 (--algo auto's choice there).
  if (world <= 1) return copy_time_us(prof, max_part_bytes);
  const CollectiveCost& own = reduce ? prof.reduce_scatter : prof.allgather;
  if (!own.points.empty()) return (world - 1) * collective_step_us(own, max_part_bytes);
  if (own.gbps > 0) return (world - 1) * (own.latency_us + transfer_us(max_part_bytes, own.gbps));
  const bool multi_node = prof.links.ranks_per_node > 0 && world > prof.links.ranks_per_node;
  const double gbps = multi_node ? std::min(prof.links.intra_gbps, prof.links.inter_gbps) : prof.links.intra_gbps;
  const double lat =
      multi_node ? std::max(prof.links.intra_latency_us, prof.links.inter_latency_us) : prof.links.intra_latency_us;
  double step = transfer_us(max_part_bytes, gbps);
  if (reduce && lowers_collectives(prof))  // a lowered ring: the sendrecv, then the add after it
    step += add_after_receive_us(prof, max_part_bytes);
  else if (reduce && prof.memory_gbps > 0)  // the add hidden under the transfer
    step = std::max(step, add_time_us(prof, max_part_bytes));
  return (world - 1) * (lat + step);
}

}  // namespace collmm
