// trace.cpp: collmm.trace's record of op calls and its files (trace.hpp).
#include "trace.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <utility>

#include "atomic_file.hpp"
#include "chrome_trace.hpp"
#include "overlap.hpp"
#include "svg.hpp"

namespace collmm::torch_ext {
namespace {

std::mutex g_mutex;  // guards every value below but the thread_local ones
bool g_tracing = false;
std::vector<TracedCall> g_calls;
std::string g_module;
std::string g_last_path = "none", g_last_options, g_last_auto;             // the last run's record
thread_local std::optional<std::string> t_backward_of;                     // set by trace_backward_begin
thread_local std::vector<std::optional<std::string>> t_outer_backward_of;  // what each begin replaced

// One of the values above, read or replaced under g_mutex.
template <class T>
T read_locked(const T& value) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return value;
}
template <class T>
void write_locked(T& value, T new_value) {
  std::lock_guard<std::mutex> lock(g_mutex);
  value = std::move(new_value);
}

std::string table(const std::vector<TracedCall>& calls) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%5s %8s %10s %7s %7s %7s %3s %5s %10s %10s %10s %7s %6s %8s  %s\n", "call", "op",
                "algo", "M", "N", "K", "P", "dtype", "time_us", "t_gemm_us", "t_comm_us", "hidden%", "E", "padded_M",
                "label");
  out += line;
  for (size_t i = 0; i < calls.size(); ++i) {
    const TracedCall& c = calls[i];
    const CallFigures f = figures(c.timeline);
    const std::string padded = c.plan_m != c.m ? std::to_string(c.plan_m) : "-";
    std::snprintf(line, sizeof line,
                  "%5zu %8s %10s %7lld %7lld %7lld %3d %5s %10.1f %10.1f %10.1f %7.1f %6.2f %8s  %s\n", i,
                  to_string(c.timeline.op).c_str(), to_string(c.timeline.algo).c_str(), static_cast<long long>(c.m),
                  static_cast<long long>(c.n), static_cast<long long>(c.k), c.timeline.world,
                  to_string(c.dtype).c_str(), f.time_us, f.t_gemm_us, f.t_comm_us, 100 * f.hidden, f.e, padded.c_str(),
                  c.label.empty() ? "-" : c.label.c_str());
    out += line;
  }
  return out;
}

}  // namespace

CallFigures figures(const Timeline& t) {
  CallFigures f;
  std::map<int, std::pair<Intervals, Intervals>> per_rank;  // rank -> (gemm, comm)
  int slowest = 0;
  for (const TimelineEvent& e : t.events) {
    if (e.end_us > f.time_us) f.time_us = e.end_us, slowest = e.rank;
    auto& [gemm, comm] = per_rank[e.rank];
    (e.counts_as_comm() ? comm : gemm).emplace_back(e.start_us, e.end_us);
  }
  if (!per_rank.empty()) {
    f.t_gemm_us = length(interval_union(per_rank[slowest].first));
    f.t_comm_us = length(interval_union(per_rank[slowest].second));
  }
  f.hidden = measure_overlap(t).mean_fraction;
  const double smaller = std::min(f.t_gemm_us, f.t_comm_us);
  f.e = smaller > 0 ? (f.t_gemm_us + f.t_comm_us - f.time_us) / smaller : 0;
  return f;
}

void trace_start() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_tracing = true;
  g_calls.clear();
}

bool tracing() { return read_locked(g_tracing); }

void trace_add(TracedCall call) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_tracing) return;
  const std::string& module = t_backward_of ? *t_backward_of : g_module;
  call.label = (module.empty() ? std::string("(no module)") : module) + (t_backward_of ? " backward" : " forward");
  g_calls.push_back(std::move(call));
}

void set_trace_module(const std::string& name) { write_locked(g_module, name); }
std::string trace_module() { return read_locked(g_module); }

void trace_backward_begin(std::string module) {
  t_outer_backward_of.push_back(std::move(t_backward_of));
  t_backward_of = std::move(module);
}

void trace_backward_end() {
  if (t_outer_backward_of.empty()) return;
  t_backward_of = std::move(t_outer_backward_of.back());
  t_outer_backward_of.pop_back();
}

std::string trace_stop(const std::string& path, bool write) {
  std::vector<TracedCall> calls;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_tracing = false;
    calls.swap(g_calls);
  }
  const std::string text = table(calls);
  if (!write) return text;
  std::vector<Timeline> timelines;
  for (size_t i = 0; i < calls.size(); ++i) {
    const Timeline& t = calls[i].timeline;
    timelines.push_back(t);
    SvgOptions o;
    o.subtitle = "collmm.trace call " + std::to_string(i) + ", M=" + std::to_string(calls[i].m) +
                 " N=" + std::to_string(calls[i].n) + " K=" + std::to_string(calls[i].k) + " " +
                 to_string(calls[i].dtype);
    write_svg(t, path + "-" + std::to_string(i) + "-" + to_string(t.op) + "-" + to_string(t.algo) + ".svg", o);
  }
  write_file_atomically(path + ".json", chrome_trace(timelines).dump() + "\n");
  write_file_atomically(path + ".txt", text);
  return text;
}

void note_last_run(const char* comm_path, const std::string& plan_options) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_last_path = comm_path;
  g_last_options = plan_options;
}
std::string last_comm_path() { return read_locked(g_last_path); }
std::string last_plan_options() { return read_locked(g_last_options); }
void note_last_auto(const std::string& report) { write_locked(g_last_auto, report); }
std::string last_auto_report() { return read_locked(g_last_auto); }

}  // namespace collmm::torch_ext
