// profile.cpp: cost-model profiles: the built-in ones, and their JSON form (read and written with
// nlohmann-json). Numbers marked "lead" are estimates to be replaced by a calibration run.
#include <algorithm>
#include <filesystem>

#include "atomic_file.hpp"
#include "collmm/sizes.hpp"
#include "input_file.hpp"
#include "json_file.hpp"
#include "json_number.hpp"
#include "profile_json.hpp"
#include "quote.hpp"

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

}  // namespace

std::vector<std::string> builtin_profile_names() { return {"h200-nvlink", "h200-ib", "h200-host", "cpu-2core"}; }

Profile builtin_profile(const std::string& name) {
  if (name == "h200-nvlink") return h200_nvlink();
  if (name == "h200-ib") return h200_ib();
  if (name == "h200-host") return h200_host();
  if (name == "cpu-2core") return cpu_2core();
  std::string msg = "unknown built-in profile " + quote(cut(name)) + " (expected a JSON file or one of:";
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

// One object of a profile file, named by where it is ("links", "gemm.table[2]"): every field the
// model reads is required, and a key it does not know is refused (a typo would otherwise leave a
// figure at a default). UsageError naming the field.
class Section {
 public:
  Section(const json& j, std::string where, const std::vector<std::string>& keys) : j_(j), where_(std::move(where)) {
    if (!j.is_object()) throw UsageError(name_or_top() + " is not an object (got " + json_brief(j) + ")");
    for (const auto& item : j.items())
      if (std::find(keys.begin(), keys.end(), item.key()) == keys.end())
        throw UsageError("unknown field " + quote(cut(field(item.key()))) +
                         " (a misspelt name? the fields are those that " + "collmm-sim --save-profile writes)");
  }
  bool has(const char* key) const { return j_.contains(key); }
  const json& at(const char* key) const {
    if (!j_.contains(key)) throw UsageError("missing field " + field(key));
    return j_.at(key);
  }
  std::string field(const std::string& key) const { return where_.empty() ? key : where_ + "." + key; }
  template <class T>
  T get(const char* key) const {
    try {
      return at(key).get<T>();
    } catch (const json::exception& e) {
      throw UsageError(field(key) + ": " + json_error_text(e));
    }
  }
  double number(const std::string& key) const {
    const json& v = at(key.c_str());
    if (!v.is_number()) throw UsageError(field(key) + ": " + json_brief(v) + " is not a number");
    return v.get<double>();
  }
  template <class Int>
  Int integer(const char* key) const {
    at(key);
    try {
      return json_integer<Int>(j_, key);
    } catch (const UsageError& e) {
      throw UsageError(field(key) + ": " + e.what());
    }
  }

 private:
  std::string name_or_top() const { return where_.empty() ? "the profile" : where_; }
  const json& j_;
  std::string where_;
};

// The fields as read; their ranges are checked by the callers (check_ranges).
Profile read_profile_fields(const json& j) {
  Profile p;
  const Section top(j, "", {"name", "notes", "gemm", "memory_gbps", "links", "contention", "collectives", "host"});
  p.name = top.has("name") ? top.get<std::string>("name") : "unnamed";  // name and notes: not read by the model
  p.notes = top.has("notes") ? top.get<std::string>("notes") : "";
  const Section g(top.at("gemm"), "gemm", {"model", "library", "overhead_us", "peak_tflops", "table"});
  p.gemm.model = parse_gemm_model(g.get<std::string>("model"));
  p.gemm.library = parse_gemm_library(g.get<std::string>("library"));
  p.gemm.overhead_us = g.number("overhead_us");
  const json& peaks = g.at("peak_tflops");
  std::vector<std::string> dtypes;
  for (Dtype d : {Dtype::f64, Dtype::f32, Dtype::tf32, Dtype::f16, Dtype::bf16, Dtype::fp8_e4m3})
    dtypes.push_back(to_string(d));
  const Section peak(peaks, "gemm.peak_tflops", dtypes);
  for (const auto& item : peaks.items())
    p.gemm.peak_tflops.push_back({parse_dtype(item.key()), peak.number(item.key())});
  const json& table = g.at("table");
  if (!table.is_array()) throw UsageError("gemm.table is not a list (got " + json_brief(table) + ")");
  for (size_t i = 0; i < table.size(); ++i) {
    const Section e(table[i], "gemm.table[" + std::to_string(i) + "]", {"dtype", "m", "n", "k", "tflops"});
    p.gemm.table.push_back({parse_dtype(e.get<std::string>("dtype")), e.integer<int64_t>("m"), e.integer<int64_t>("n"),
                            e.integer<int64_t>("k"), e.number("tflops")});
  }
  p.memory_gbps = top.number("memory_gbps");
  const Section l(top.at("links"), "links",
                  {"ranks_per_node", "intra_gbps", "intra_latency_us", "inter_gbps", "inter_latency_us",
                   "collective_step_us", "serial_messages"});
  p.links.ranks_per_node = l.integer<int>("ranks_per_node");
  p.links.intra_gbps = l.number("intra_gbps");
  p.links.intra_latency_us = l.number("intra_latency_us");
  p.links.inter_gbps = l.number("inter_gbps");
  p.links.inter_latency_us = l.number("inter_latency_us");
  p.links.collective_step_us = l.number("collective_step_us");
  p.links.serial_messages = l.get<bool>("serial_messages");
  const Section c(top.at("contention"), "contention",
                  {"transport_uses_sms", "gemm_slowdown", "comm_slowdown", "launch_order"});
  p.contention.transport_uses_sms = c.get<bool>("transport_uses_sms");
  p.contention.gemm_slowdown = c.number("gemm_slowdown");
  p.contention.comm_slowdown = c.number("comm_slowdown");
  p.contention.launch_order = c.get<bool>("launch_order");
  const Section colls(top.at("collectives"), "collectives", {"allgather", "reduce_scatter"});
  for (auto [key, cost] :
       {std::pair<const char*, CollectiveCost*>{"allgather", &p.allgather}, {"reduce_scatter", &p.reduce_scatter}}) {
    const Section e(colls.at(key), colls.field(key), {"gbps", "latency_us", "points"});
    cost->gbps = e.number("gbps");  // 0: the ring model over the links
    cost->latency_us = e.number("latency_us");
    cost->points = e.get<std::vector<std::pair<double, double>>>("points");
    for (size_t i = 0; i < cost->points.size(); ++i)
      if (!(cost->points[i].first > 0 && cost->points[i].second > 0) ||
          (i > 0 && !(cost->points[i].first > cost->points[i - 1].first)))
        throw UsageError(e.field("points") + " must be [bytes, us] pairs, both > 0, bytes ascending");
  }
  const Section h(top.at("host"), "host", {"issue_us", "shared", "gemm_issue_us"});
  p.host.issue_us = h.number("issue_us");
  p.host.shared = h.get<bool>("shared");
  p.host.gemm_issue_us = h.number("gemm_issue_us");
  return p;  // the figures' ranges: check_ranges, with each field's name
}

}  // namespace

Profile profile_from_json(const json& j) {
  try {
    Profile p = read_profile_fields(j);
    check_ranges(p, false);
    return p;
  } catch (const UsageError& e) {
    const bool named = j.is_object() && j.contains("name") && j.at("name").is_string();
    throw UsageError("profile " + quote(cut(named ? j.at("name").get<std::string>() : "unnamed")) + ": " + e.what());
  }
}

Profile load_profile(const std::string& name_or_path) {
  for (auto& n : builtin_profile_names())
    if (n == name_or_path) return builtin_profile(n);
  std::error_code ec;
  if (!std::filesystem::exists(name_or_path, ec)) return builtin_profile(name_or_path);  // the message lists the names
  const std::string what = "profile " + quote(name_or_path);
  std::string text;  // a regular file up to kMaxInputFileBytes (input_file.hpp)
  if (const std::string why = read_input_file(name_or_path, kMaxInputFileBytes, text); !why.empty())
    throw UsageError(what + " cannot be read (" + why + ")");
  const json j = parse_json_file(text, what);
  try {
    Profile p = read_profile_fields(j);
    check_ranges(p, true);
    return p;
  } catch (const UsageError& e) {
    throw UsageError(what + ": " + e.what());
  }
}

void save_profile(const Profile& p, const std::string& path) { write_file_atomically(path, to_json(p).dump(2) + "\n"); }

}  // namespace collmm
