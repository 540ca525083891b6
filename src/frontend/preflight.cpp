// preflight.cpp: output paths and memory checked before any work (preflight.hpp).
#include "preflight.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "atomic_file.hpp"
#include "collmm/ops.hpp"
#include "quote.hpp"
#include "save_dir.hpp"

namespace collmm {
namespace {

void check_file_writable(const std::string& path, const std::string& option) {
  if (path.empty()) return;
  if (const std::string why = why_not_writable(path); !why.empty())
    throw UsageError(option + " " + quote(path) + ": cannot be written (" + why + "); nothing was run");
}

void check_dir_writable(const std::string& dir, const std::string& option) {
  if (dir.empty()) return;
  std::error_code ec;
  if (std::filesystem::is_symlink(dir, ec) && !std::filesystem::exists(dir, ec))
    throw UsageError(option + ": cannot create directory " + quote(dir) + " (it is a symbolic link to " +
                     quote(std::filesystem::read_symlink(dir, ec).string()) +
                     ", which does not exist); nothing was run");
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec))
    throw UsageError(option + ": cannot create directory " + quote(dir) + " (it exists and is not a directory)" +
                     "; nothing was run");
  std::filesystem::create_directories(dir, ec);  // several processes race here; check the result
  if (!std::filesystem::is_directory(dir))
    throw UsageError(option + ": cannot create directory " + quote(dir) + (ec ? " (" + ec.message() + ")" : "") +
                     "; nothing was run");
  // A file of the save's names ("<op>-<label>-rank<r>-A.npy", -B, -C, -gathered) that this process
  // could not replace.
  std::vector<std::string> names;
  try {
    names = files_of(dir);
  } catch (const std::runtime_error& e) {
    throw UsageError(option + ": " + e.what() + "; nothing was run");
  }
  for (const std::string& name : names) {
    const bool saved =
        name.find("-rank") != std::string::npos && (name.ends_with("-A.npy") || name.ends_with("-B.npy") ||
                                                    name.ends_with("-C.npy") || name.ends_with("-gathered.npy"));
    if (const std::string why = saved ? why_not_replaceable(dir + "/" + name) : ""; !why.empty())
      throw UsageError(option + ": cannot write " + quote(dir + "/" + name) + " (" + why + "); nothing was run");
  }
  try {  // a temporary of an unpredictable name, as the save's own files will be written
    std::string probe;
    ::close(create_temporary(dir, ".collmm-probe", 0600, probe, "into " + quote(dir)));
    ::unlink(probe.c_str());
  } catch (const std::runtime_error& e) {
    throw UsageError(option + ": " + e.what() + "; nothing was run");
  }
}

int64_t elems(const BufferSpec& b) { return b.rows * b.cols; }

}  // namespace

void check_outputs_writable(const BenchOptions& o, bool writer) {
  if (writer) {
    check_file_writable(o.json_path, "--json");
    check_file_writable(o.trace_path, "--trace");
    check_file_writable(o.timeline_path, "--timeline");
    check_file_writable(o.tune_cache_path, "--tune-cache");
    check_file_writable(o.calibrate_path, "--calibrate");
  }
  check_dir_writable(o.save_dir, "--save");
}

void check_timeline_paths(const std::string& base, const std::vector<std::pair<Op, std::string>>& cases) {
  if (base.empty()) return;
  for (const auto& [op, label] : cases)
    check_file_writable(timeline_path(base, op, label, cases.size() > 1), "--timeline");
}

MemoryNeed memory_need(const BenchOptions& o, const std::vector<std::pair<Op, PlanOptions>>& cases, int world,
                       const std::vector<int>& local_ranks, Dtype out_dtype, bool plays_peers) {
  MemoryNeed need;
  need.device_bytes.assign(local_ranks.size(), 0);
  int64_t host_extra = 0;
  const int64_t in_size = static_cast<int64_t>(dtype_size(o.dtype));
  const int64_t out_size = static_cast<int64_t>(dtype_size(out_dtype));
  for (const auto& [op, options] : cases) {
    const Problem p = problem_of(o, op, world);
    int64_t extra = 0, peer_device = 0;
    if (plays_peers) {
      // The job's A (and gemm_rs's and gemm_ar's B) generated (f64 + encoded) and on the device; two
      // accumulators and a running sum of one block (bounded by C); what the rank receives and sends, pinned.
      const int64_t inputs = p.m * p.k + (sums_over_ranks(op) ? p.k * p.n : 0);
      const int64_t block = (p.m / world + 1) * p.n * out_size;
      extra += inputs * (8 + in_size) + op_row(op).played_link_bytes(p, in_size, out_size);
      peer_device = inputs * in_size + 3 * block + (int64_t(64) << 20);
    }
    for (size_t i = 0; i < local_ranks.size(); ++i) {
      const Plan plan = make_plan(p, options, local_ranks[i]);
      int64_t bytes = 0;
      for (const BufferSpec& b : plan.buffers)
        bytes += elems(b) * static_cast<int64_t>(dtype_size(buffer_dtype(b.role, o.dtype, out_dtype)));
      need.device_bytes[i] = std::max(need.device_bytes[i], bytes + peer_device);
      const LocalShape s = local_shape(p, local_ranks[i]);
      extra += (s.a_rows * s.a_cols + s.b_rows * s.b_cols) * (8 + in_size);  // generated, then encoded
      if (o.check) extra += s.c_rows * s.c_cols * 8 * 2;                     // the reference and the read-back C
    }
    if (o.check && gathers_a(op)) extra += p.m * p.k * 8 * 2;  // the gathered A's reference and read-back
    host_extra = std::max(host_extra, extra);
  }
  need.host_bytes = host_extra;
  return need;
}

}  // namespace collmm
