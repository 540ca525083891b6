// tuning_cache.cpp: the measured tuning cache's file (src/sim/tuning.hpp): parsed and checked entry
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

#include <nlohmann/json.hpp>

#include "atomic_file.hpp"
#include "collmm/sizes.hpp"
#include "input_file.hpp"
#include "json_file.hpp"
#include "json_number.hpp"
#include "poll.hpp"
#include "quote.hpp"
#include "tuning.hpp"

namespace collmm {
namespace {

using nlohmann::json;

void need(bool ok, const std::string& what) {
  if (!ok) throw UsageError(what);
}

// Reads every field of `value` from JSON object `j` by its field list: a required key must be
// there, an absent other key keeps its default; an integer outside its range is a UsageError.
template <class V>
void fields_from_json(const json& j, V& value) {
  for_each_field(value, [&](const Field& f, auto& v) {
    using T = std::decay_t<decltype(v)>;
    if (!f.required && !j.contains(f.key)) return;
    if constexpr (std::is_enum_v<T>) {
      parse_field(json_string(j, f.key), v);
    } else {
      v = json_integer<T>(j, f.key);
      need(out_of_range(f, v).empty(), out_of_range(f, v));
    }
  });
}

template <class V>
void fields_to_json(const V& value, json& j) {
  for_each_field(value, [&](const Field& f, const auto& v) {
    if constexpr (std::is_enum_v<std::decay_t<decltype(v)>>)
      j[f.key] = to_string(v);
    else
      j[f.key] = v;
  });
}

TuningEntry entry_from_json(const json& e) {
  if (!e.is_object()) throw UsageError("not an object (got " + json_brief(e) + ")");
  TuningEntry t;
  fields_from_json(e, t.problem);
  t.dtype = parse_dtype(json_string(e, "dtype"));
  t.options = plan_options_from_json(e);
  // A cache written before waves had their own key kept gemm_ar's ring's waves in "stages".
  if (!e.contains("waves") && !algorithm(t.options.algo).takes_stages && takes_waves(t.problem.op, t.options.algo))
    std::swap(t.options.waves, t.options.stages);
  t.time_us = json_double(e, "time_us");
  if (e.contains("source")) t.source = json_string(e, "source");
  need(t.source == "bench" || t.source == "auto", "source must be bench or auto (got " + quote(cut(t.source)) + ")");
  need(std::isfinite(t.time_us) && t.time_us > 0, "time_us must be a number > 0");
  // What collmm-bench would refuse for this shape is refused here too (the one check, validate):
  // an entry no run could have measured must not be picked later.
  const Problem& p = t.problem;
  try {
    validate(p, t.options);
  } catch (const UsageError& e) {
    throw UsageError("its plan options cannot apply to its own shape (" + to_string(p) + "): " + e.what());
  }
  return t;
}

// The cache's text: a regular file up to kMaxInputFileBytes (input_file.hpp).
std::string read_all(const std::string& path) {
  std::string text;
  if (const std::string why = read_input_file(path, kMaxInputFileBytes, text); !why.empty())
    throw UsageError("cannot read tuning cache " + quote(path) + " (" + why + ")");
  return text;
}

// An exclusive flock on `path`, released (and the descriptor closed) when it goes.
class FileLock {
 public:
  FileLock(const std::string& path, int timeout_s) : path_(path) {
    // Read-only is enough for flock, so every user who can read a shared cache's lock can take it;
    // never through a symbolic link.
    fd_ = ::open(path.c_str(), O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd_ < 0) throw std::runtime_error("cannot open lock file " + quote(path) + ": " + std::strerror(errno));
    const bool locked = poll_until(
        [&] {
          if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return true;
          if (errno != EWOULDBLOCK && errno != EINTR) fail(std::string("flock: ") + std::strerror(errno));
          return false;
        },
        std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s), kLockPace);
    if (!locked) fail("another job has held it for " + std::to_string(timeout_s) + " s");
  }
  ~FileLock() { ::close(fd_); }  // closing releases the lock
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  [[noreturn]] void fail(const std::string& why) {
    ::close(fd_);
    throw std::runtime_error("cannot lock " + quote(path_) + ": " + why);
  }
  std::string path_;
  int fd_ = -1;
};

// The shape an entry measured: its problem and dtype.
ProblemKey shape_of(const TuningEntry& e) { return {e.problem, e.dtype}; }

}  // namespace

json to_json(const PlanOptions& o) {
  json j = json::object();
  fields_to_json(o, j);
  return j;
}

json to_json(const Problem& p) {
  json j = json::object();
  fields_to_json(p, j);
  return j;
}

json case_json(const Problem& p, const PlanOptions& o, Dtype dtype) {
  json j = to_json(p);
  j["dtype"] = to_string(dtype);
  fields_to_json(o, j);
  return j;
}

PlanOptions plan_options_from_json(const json& j) {
  PlanOptions o;
  fields_from_json(j, o);
  return o;
}

std::vector<TuningEntry> TuningCache::find(const Problem& p, Dtype d) const {
  std::vector<TuningEntry> out;
  for (const TuningEntry& e : entries)
    if (shape_of(e) == ProblemKey{p, d}) out.push_back(e);
  return out;
}

void TuningCache::record(const TuningEntry& e) {
  for (TuningEntry& x : entries)
    if (shape_of(x) == shape_of(e) && x.options == e.options) {
      x.time_us = e.time_us;
      x.source = e.source;
      return;
    }
  entries.push_back(e);
}

TuningCache parse_tuning_cache(const std::string& text, const std::string& path) {
  TuningCache cache;
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return cache;  // an empty file: nothing measured yet
  const json j = parse_json_file(text, "tuning cache " + quote(path));
  if (!j.is_object() || !j.contains("entries") || !j.at("entries").is_array())
    throw UsageError("tuning cache " + quote(path) + ": no \"entries\" list");
  size_t i = 0;
  for (const json& e : j.at("entries")) {
    try {
      cache.entries.push_back(entry_from_json(e));
    } catch (const json::exception& x) {
      throw UsageError("tuning cache " + quote(path) + ": entry " + std::to_string(i) + ": " + json_error_text(x));
    } catch (const UsageError& x) {
      throw UsageError("tuning cache " + quote(path) + ": entry " + std::to_string(i) + ": " + x.what());
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
    fields_to_json(e.problem, entry);
    entry.update({{"dtype", to_string(e.dtype)}, {"time_us", e.time_us}, {"source", e.source}});
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
