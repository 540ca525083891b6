// tuning_cache.cpp: the measured tuning cache's file (collmm/tuning.hpp): parsed and checked entry
// by entry, written atomically (temporary file + rename), and updated under a lock so that jobs
// sharing one cache neither lose each other's entries nor leave a corrupt file.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "atomic_file.hpp"
#include "collmm/sizes.hpp"
#include "collmm/tuning.hpp"
#include "json_number.hpp"

namespace collmm {
namespace {

using nlohmann::json;

void need(bool ok, const std::string& what) {
  if (!ok) throw UsageError(what);
}

TuningEntry entry_from_json(const json& e) {
  TuningEntry t;
  t.op = parse_op(e.at("op").get<std::string>());
  t.m = json_integer<int64_t>(e, "m");
  t.n = json_integer<int64_t>(e, "n");
  t.k = json_integer<int64_t>(e, "k");
  t.world = json_integer<int>(e, "world_size");
  t.dtype = parse_dtype(e.at("dtype").get<std::string>());
  t.options = plan_options_from_json(e);
  t.time_us = e.at("time_us").get<double>();
  if (e.contains("b_layout")) t.b_layout = parse_b_layout(e.at("b_layout").get<std::string>());
  if (e.contains("source")) t.source = e.at("source").get<std::string>();
  need(t.source == "bench" || t.source == "auto", "source must be bench or auto (got " + t.source + ")");
  need(t.m >= 1 && t.n >= 1 && t.k >= 1 && t.m <= kMaxSize && t.n <= kMaxSize && t.k <= kMaxSize,
       "m, n and k must be 1.." + std::to_string(kMaxSize));
  need(t.world >= 1 && t.world <= kMaxWorld,
       "world_size " + std::to_string(t.world) + " is not 1.." + std::to_string(kMaxWorld));
  need(std::isfinite(t.time_us) && t.time_us > 0, "time_us must be a number > 0");
  // What collmm-bench would refuse for this shape is refused here too (the one check, validate):
  // an entry no run could have measured must not be picked later.
  Problem p;
  p.op = t.op, p.m = t.m, p.n = t.n, p.k = t.k, p.world = t.world;
  try {
    validate(p, t.options);
  } catch (const UsageError& e) {
    throw UsageError("its plan options cannot apply to its own shape (" + to_string(t.op) +
                     " M=" + std::to_string(t.m) + " N=" + std::to_string(t.n) + " K=" + std::to_string(t.k) +
                     " P=" + std::to_string(t.world) + "): " + e.what());
  }
  return t;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("cannot read tuning cache " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// An exclusive flock on `path`, released (and the descriptor closed) when it goes.
class FileLock {
 public:
  FileLock(const std::string& path, int timeout_s) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw std::runtime_error("cannot open lock file " + path + ": " + std::strerror(errno));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) fail(std::string("flock: ") + std::strerror(errno));
      if (std::chrono::steady_clock::now() > deadline)
        fail("another job has held it for " + std::to_string(timeout_s) + " s");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~FileLock() { ::close(fd_); }  // closing releases the lock
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  [[noreturn]] void fail(const std::string& why) {
    ::close(fd_);
    throw std::runtime_error("cannot lock " + path_ + ": " + why);
  }
  std::string path_;
  int fd_ = -1;
};

// The shape an entry measured: (op, M, N, K, P, dtype).
bool same_shape(const TuningEntry& a, const TuningEntry& b) {
  return a.op == b.op && a.m == b.m && a.n == b.n && a.k == b.k && a.world == b.world && a.dtype == b.dtype &&
         a.b_layout == b.b_layout;
}

}  // namespace

json to_json(const PlanOptions& o) {
  return {{"algo", to_string(o.algo)},  {"stages", o.stages}, {"post", to_string(o.post)},
          {"gemm_lanes", o.gemm_lanes}, {"merge", o.merge},   {"pieces", o.pieces}};
}

PlanOptions plan_options_from_json(const json& j) {
  PlanOptions o;
  o.algo = parse_algo(j.at("algo").get<std::string>());
  o.stages = json_integer<int>(j, "stages", 0);
  if (j.contains("post")) o.post = parse_post(j.at("post").get<std::string>());
  o.gemm_lanes = json_integer<int>(j, "gemm_lanes", 1);
  o.merge = json_integer<int>(j, "merge", 1);
  o.pieces = json_integer<int>(j, "pieces", 1);
  need(o.stages >= 0, "stages " + std::to_string(o.stages) + " is negative");
  need(o.gemm_lanes >= 1 && o.gemm_lanes <= kMaxGemmLanes,
       "gemm_lanes " + std::to_string(o.gemm_lanes) + " is not 1.." + std::to_string(kMaxGemmLanes));
  need(o.merge >= 1 && o.merge <= kMaxWorld,
       "merge " + std::to_string(o.merge) + " is not 1.." + std::to_string(kMaxWorld));
  need(o.pieces >= 1 && o.pieces <= kMaxPieces,
       "pieces " + std::to_string(o.pieces) + " is not 1.." + std::to_string(kMaxPieces));
  return o;
}

std::vector<TuningEntry> TuningCache::find(const Problem& p, Dtype d) const {
  TuningEntry shape;
  shape.op = p.op, shape.m = p.m, shape.n = p.n, shape.k = p.k, shape.world = p.world, shape.dtype = d;
  shape.b_layout = p.b_layout;
  std::vector<TuningEntry> out;
  for (const TuningEntry& e : entries)
    if (same_shape(e, shape)) out.push_back(e);
  return out;
}

void TuningCache::record(const TuningEntry& e) {
  for (TuningEntry& x : entries)
    if (same_shape(x, e) && x.options == e.options) {
      x.time_us = e.time_us;
      x.source = e.source;
      return;
    }
  entries.push_back(e);
}

TuningCache parse_tuning_cache(const std::string& text, const std::string& path) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) throw UsageError("tuning cache " + path + " is not valid JSON");
  TuningCache cache;
  if (!j.is_object() || !j.contains("entries") || !j.at("entries").is_array())
    throw UsageError("tuning cache " + path + ": no \"entries\" list");
  size_t i = 0;
  for (const json& e : j.at("entries")) {
    try {
      cache.entries.push_back(entry_from_json(e));
    } catch (const json::exception& x) {
      throw UsageError("tuning cache " + path + ": entry " + std::to_string(i) + ": " + x.what());
    } catch (const UsageError& x) {
      throw UsageError("tuning cache " + path + ": entry " + std::to_string(i) + ": " + x.what());
    }
    ++i;
  }
  return cache;
}

TuningCache load_tuning_cache(const std::string& path) { return parse_tuning_cache(read_all(path), path); }

void save_tuning_cache(const TuningCache& cache, const std::string& path) {
  json entries = json::array();
  for (const TuningEntry& e : cache.entries) {
    json entry = to_json(e.options);
    entry.update({{"op", to_string(e.op)},
                  {"m", e.m},
                  {"n", e.n},
                  {"k", e.k},
                  {"world_size", e.world},
                  {"dtype", to_string(e.dtype)},
                  {"time_us", e.time_us},
                  {"b_layout", to_string(e.b_layout)},
                  {"source", e.source}});
    entries.push_back(entry);
  }
  const std::string text = json{{"entries", entries}}.dump(2) + "\n";
  write_file_atomically(path, text);
}

void update_tuning_cache(const std::string& path, const std::vector<TuningEntry>& entries, int lock_timeout_s) {
  FileLock lock(path + ".lock", lock_timeout_s);
  TuningCache cache;
  if (::access(path.c_str(), F_OK) == 0) cache = load_tuning_cache(path);
  for (const TuningEntry& e : entries) cache.record(e);
  save_tuning_cache(cache, path);
}

}  // namespace collmm
