// profile.cpp: cost-model profiles: the built-in ones, and their JSON form (read and written with
// nlohmann-json). Numbers marked "lead" are estimates to be replaced by a calibration run.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "atomic_file.hpp"
#include "collmm/cost_model.hpp"
#include "collmm/sizes.hpp"
#include "json_file.hpp"
#include "json_number.hpp"

namespace collmm {
namespace {

using nlohmann::json;

Profile h200_nvlink() {
  Profile p;
  p.name = "h200-nvlink";
  p.notes =
      "One NVLink domain of H200s. bf16 GEMM rates measured on one H200 with cuBLASLt "
      "(docs/device-notes.md, 2026-12-02); other dtypes' peaks are leads. Memory 4300 GB/s: "
      "the measured D2D copy counting read + write. NVLink 370 GB/s per direction per GPU and "
      "5 us latency: leads (450 GB/s NVLink4 line rate, ~370 reached by NCCL), not measured. "
      "GEMM slowdown 1.06 under an SM transfer posted first (measured for an SM copy); comm "
      "slowdown 1.0 is a lead. launch_order: a GEMM holding every SM delays a later SM transfer "
      "(measured).";
  p.gemm.model = GemmModel::table;
  p.gemm.overhead_us = 1.0;  // lead: launch gap between dependent kernels
  p.gemm.peak_tflops = {{Dtype::bf16, 790}, {Dtype::f16, 790}, {Dtype::fp8_e4m3, 1400},
                        {Dtype::tf32, 400}, {Dtype::f32, 60},  {Dtype::f64, 60}};
  const Dtype b = Dtype::bf16;
  p.gemm.table = {{b, 8192, 8192, 8192, 796}, {b, 4096, 8192, 8192, 742}, {b, 2048, 8192, 8192, 736},
                  {b, 1024, 8192, 8192, 727}, {b, 512, 8192, 8192, 709},  {b, 8192, 3584, 8192, 741},
                  {b, 1024, 3584, 8192, 620}, {b, 4096, 4096, 4096, 711}, {b, 1024, 4096, 4096, 662}};
  p.memory_gbps = 4300;
  p.links = {0, 370, 5, 370, 5};
  p.contention = {true, 1.06, 1.0, true};
  return p;
}

Profile h200_ib() {
  Profile p = h200_nvlink();
  p.name = "h200-ib";
  p.notes +=
      " Nodes of 8 GPUs joined by 400 Gb/s InfiniBand, one NIC per GPU: 45 GB/s and 10 us "
      "between nodes (leads).";
  p.links = {8, 370, 5, 45, 10};
  return p;
}

Profile h200_host() {
  Profile p = h200_nvlink();
  p.name = "h200-host";
  p.notes =
      "The host transport's bed (cuda --transport host): one H200 rank whose peers are pinned host "
      "memory, the link PCIe copy engines. GEMM rates as h200-nvlink. Link 48 GB/s per direction, "
      "both directions at once, 10 us latency: measured on the bed (ag_gemm P = 4, M = 8192, "
      "2026-12-03): 44 GB/s for the collective alone (the GPU idle, its clocks down), 50 GB/s for "
      "the ring's transfers beside GEMMs; copy engines leave the SMs to the GEMMs (no "
      "contention). Collectives run as rings over the link, lowered to sendrecv and add steps: "
      "an add after a receive pays 8 us more (the event hop from the copy streams to the lane, as "
      "the bed's timelines show), in a lowered reduce-scatter as in the rings; an allgather's "
      "steps pay none (its small-M steps measured 9.5 us + bytes at 52 GB/s). The messages of one "
      "step that go the same way queue on one copy stream, each paying the latency (bidir's two "
      "sends: 6-16 us more per step than the ring at small M). Fitted on the 108 limit rows and "
      "the 64 small-M targets cases of 2026-12-04 (scripts/model-check.py).";
  p.links = {0, 48, 10, 48, 10};
  p.links.collective_step_us = 8;
  p.links.serial_messages = true;
  p.contention = {false, 1.0, 1.0, false};
  return p;
}

Profile cpu_2core() {
  Profile p;
  p.name = "cpu-2core";
  p.notes =
      "Rough: one rank per core of a 2-core AMD EPYC VM, MPI over shared memory. f32 peak from "
      "OpenBLAS sgemm 1024^3 on one thread (64 GFLOP/s measured); f64, bf16, memory, link and "
      "contention figures are leads. The MPI progress thread takes a core from the GEMM.";
  p.gemm.model = GemmModel::roofline;
  p.gemm.library = GemmLibrary::openblas;
  p.gemm.overhead_us = 2;
  p.gemm.peak_tflops = {{Dtype::f32, 0.060}, {Dtype::f64, 0.030}, {Dtype::bf16, 0.020}};
  p.memory_gbps = 8;
  p.links = {0, 4, 2, 4, 2};
  p.contention = {true, 1.2, 1.2, false};
  return p;
}

// The range of every figure a profile holds, written once: checked whenever a profile is read, so
// that a bad one is refused before any work. Bandwidths may be 0 (absent: the model has no link)
// in a profile built in code; one read from a file must be usable: they must be > 0 there.
constexpr double kMaxFigure = 1e9;  // GB/s, TFLOP/s, microseconds: far above any machine

void in_range(const std::string& name, double v, double lo, double hi, bool lo_open = false) {
  if (v >= lo && v <= hi && !(lo_open && v == lo)) return;
  std::ostringstream msg;
  msg << name << " = " << v << " is not " << (lo_open ? "> " : ">= ") << lo << " and <= " << hi;
  throw UsageError(msg.str());
}

void check_ranges(const Profile& p, bool from_file) {
  const GemmCost& g = p.gemm;
  in_range("gemm.overhead_us", g.overhead_us, 0, kMaxFigure);
  for (const auto& [d, tf] : g.peak_tflops) in_range("gemm.peak_tflops." + to_string(d), tf, 0, kMaxFigure, true);
  for (const GemmPoint& e : g.table) {
    in_range("gemm.table m, n and k", static_cast<double>(std::min({e.m, e.n, e.k})), 1, static_cast<double>(kMaxSize));
    in_range("gemm.table m, n and k", static_cast<double>(std::max({e.m, e.n, e.k})), 1, static_cast<double>(kMaxSize));
    in_range("gemm.table tflops", e.tflops, 0, kMaxFigure, true);
  }
  in_range("memory_gbps", p.memory_gbps, 0, kMaxFigure, from_file);
  in_range("links.ranks_per_node", p.links.ranks_per_node, 0, kMaxWorld);
  in_range("links.intra_gbps", p.links.intra_gbps, 0, kMaxFigure, from_file);
  in_range("links.inter_gbps", p.links.inter_gbps, 0, kMaxFigure, from_file);
  in_range("links.intra_latency_us", p.links.intra_latency_us, 0, kMaxFigure);
  in_range("links.inter_latency_us", p.links.inter_latency_us, 0, kMaxFigure);
  in_range("links.collective_step_us", p.links.collective_step_us, 0, kMaxFigure);
  in_range("contention.gemm_slowdown", p.contention.gemm_slowdown, 1, 100);
  in_range("contention.comm_slowdown", p.contention.comm_slowdown, 1, 100);
  for (auto [key, c] : {std::pair<const char*, const CollectiveCost*>{"allgather", &p.allgather},
                        {"reduce_scatter", &p.reduce_scatter}}) {
    in_range(std::string("collectives.") + key + ".gbps", c->gbps, 0, kMaxFigure);
    in_range(std::string("collectives.") + key + ".latency_us", c->latency_us, 0, kMaxFigure);
  }
  in_range("host.issue_us", p.host.issue_us, 0, kMaxFigure);
  in_range("host.gemm_issue_us", p.host.gemm_issue_us, 0, kMaxFigure);
}

template <class T>
T get(const json& j, const char* key, T fallback) {
  return j.contains(key) ? j.at(key).get<T>() : fallback;
}

}  // namespace

std::vector<std::string> builtin_profile_names() { return {"h200-nvlink", "h200-ib", "h200-host", "cpu-2core"}; }

Profile builtin_profile(const std::string& name) {
  if (name == "h200-nvlink") return h200_nvlink();
  if (name == "h200-ib") return h200_ib();
  if (name == "h200-host") return h200_host();
  if (name == "cpu-2core") return cpu_2core();
  std::string msg = "unknown built-in profile '" + name + "' (expected a JSON file or one of:";
  for (auto& n : builtin_profile_names()) msg += " " + n;
  throw UsageError(msg + ")");
}

json to_json(const Profile& p) {
  json peaks = json::object();
  for (auto& [d, tf] : p.gemm.peak_tflops) peaks[to_string(d)] = tf;
  json table = json::array();
  for (const GemmPoint& g : p.gemm.table)
    table.push_back(json{{"dtype", to_string(g.dtype)}, {"m", g.m}, {"n", g.n}, {"k", g.k}, {"tflops", g.tflops}});
  return {
      {"name", p.name},
      {"notes", p.notes},
      {"gemm",
       {{"model", to_string(p.gemm.model)},
        {"library", to_string(p.gemm.library)},
        {"overhead_us", p.gemm.overhead_us},
        {"peak_tflops", peaks},
        {"table", table}}},
      {"memory_gbps", p.memory_gbps},
      {"links",
       {{"ranks_per_node", p.links.ranks_per_node},
        {"intra_gbps", p.links.intra_gbps},
        {"intra_latency_us", p.links.intra_latency_us},
        {"inter_gbps", p.links.inter_gbps},
        {"inter_latency_us", p.links.inter_latency_us},
        {"collective_step_us", p.links.collective_step_us},
        {"serial_messages", p.links.serial_messages}}},
      {"contention",
       {{"transport_uses_sms", p.contention.transport_uses_sms},
        {"gemm_slowdown", p.contention.gemm_slowdown},
        {"comm_slowdown", p.contention.comm_slowdown},
        {"launch_order", p.contention.launch_order}}},
      {"collectives",
       {{"allgather",
         {{"gbps", p.allgather.gbps}, {"latency_us", p.allgather.latency_us}, {"points", p.allgather.points}}},
        {"reduce_scatter",
         {{"gbps", p.reduce_scatter.gbps},
          {"latency_us", p.reduce_scatter.latency_us},
          {"points", p.reduce_scatter.points}}}}},
      {"host", {{"issue_us", p.host.issue_us}, {"shared", p.host.shared}, {"gemm_issue_us", p.host.gemm_issue_us}}}};
}

namespace {

// The fields as read; their ranges are checked by the callers (check_ranges).
Profile read_profile_fields(const json& j) {
  try {
    Profile p;
    p.name = get<std::string>(j, "name", "unnamed");
    p.notes = get<std::string>(j, "notes", "");
    const json g = get<json>(j, "gemm", json::object());
    p.gemm.model = parse_gemm_model(get<std::string>(g, "model", "roofline"));
    p.gemm.library = parse_gemm_library(get<std::string>(g, "library", "cublaslt"));  // absent: the GPU's
    p.gemm.overhead_us = get<double>(g, "overhead_us", 0);
    const json peaks = get<json>(g, "peak_tflops", json::object());
    const json table = get<json>(g, "table", json::array());
    for (auto& [d, tf] : peaks.items()) p.gemm.peak_tflops.push_back({parse_dtype(d), tf.get<double>()});
    for (const json& e : table)
      p.gemm.table.push_back({parse_dtype(e.at("dtype").get<std::string>()), json_integer<int64_t>(e, "m"),
                              json_integer<int64_t>(e, "n"), json_integer<int64_t>(e, "k"),
                              e.at("tflops").get<double>()});
    p.memory_gbps = get<double>(j, "memory_gbps", 0);
    const json l = get<json>(j, "links", json::object());
    p.links.ranks_per_node = json_integer<int>(l, "ranks_per_node", 0);
    p.links.intra_gbps = get<double>(l, "intra_gbps", 0);
    p.links.intra_latency_us = get<double>(l, "intra_latency_us", 0);
    p.links.inter_gbps = get<double>(l, "inter_gbps", p.links.intra_gbps);
    p.links.inter_latency_us = get<double>(l, "inter_latency_us", p.links.intra_latency_us);
    p.links.collective_step_us = get<double>(l, "collective_step_us", 0);
    p.links.serial_messages = get<bool>(l, "serial_messages", false);
    const json c = get<json>(j, "contention", json::object());
    p.contention.transport_uses_sms = get<bool>(c, "transport_uses_sms", false);
    p.contention.gemm_slowdown = get<double>(c, "gemm_slowdown", 1);
    p.contention.comm_slowdown = get<double>(c, "comm_slowdown", 1);
    p.contention.launch_order = get<bool>(c, "launch_order", false);
    const json colls = get<json>(j, "collectives", json::object());
    for (auto [key, cost] :
         {std::pair<const char*, CollectiveCost*>{"allgather", &p.allgather}, {"reduce_scatter", &p.reduce_scatter}}) {
      const json e = get<json>(colls, key, json::object());
      cost->gbps = get<double>(e, "gbps", 0);  // 0 (absent): the ring model over the links
      cost->latency_us = get<double>(e, "latency_us", 0);
      cost->points = get<std::vector<std::pair<double, double>>>(e, "points", {});
      for (size_t i = 0; i < cost->points.size(); ++i)
        if (!(cost->points[i].first > 0 && cost->points[i].second > 0) ||
            (i > 0 && !(cost->points[i].first > cost->points[i - 1].first)))
          throw UsageError("profile '" + p.name + "': collectives." + key +
                           ".points must be [bytes, us] pairs, both > 0, bytes ascending");
    }
    const json h = get<json>(j, "host", json::object());  // absent (older profiles): no host term
    p.host.issue_us = get<double>(h, "issue_us", 0);
    p.host.shared = get<bool>(h, "shared", false);
    p.host.gemm_issue_us = get<double>(h, "gemm_issue_us", 0);
    return p;  // the figures' ranges: check_ranges, with each field's name
  } catch (const json::exception& e) {
    throw UsageError("profile JSON: " + json_error_text(e));
  }
}

}  // namespace

Profile profile_from_json(const json& j) {
  Profile p = read_profile_fields(j);
  try {
    check_ranges(p, false);
  } catch (const UsageError& e) {
    throw UsageError("profile '" + p.name + "': " + e.what());
  }
  return p;
}

Profile load_profile(const std::string& name_or_path) {
  for (auto& n : builtin_profile_names())
    if (n == name_or_path) return builtin_profile(n);
  std::error_code ec;
  if (std::filesystem::is_directory(name_or_path, ec))
    throw UsageError("profile " + name_or_path + " is a directory, not a profile JSON file");
  std::ifstream in(name_or_path);
  if (!in) return builtin_profile(name_or_path);  // neither: the message lists the built-in names
  std::ostringstream text;
  text << in.rdbuf();
  Profile p = read_profile_fields(parse_json_file(text.str(), "profile " + name_or_path));
  try {
    check_ranges(p, true);
  } catch (const UsageError& e) {
    throw UsageError("profile " + name_or_path + ": " + e.what());
  }
  return p;
}

void save_profile(const Profile& p, const std::string& path) { write_file_atomically(path, to_json(p).dump(2) + "\n"); }

}  // namespace collmm
