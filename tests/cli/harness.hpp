// harness.hpp: what the cli tests share: running a command (collmm-bench under mpirun) with a time
// limit and its output and exit code captured, a job held in the background, a fresh output
// directory, and a small .npy reader.
#pragma once

#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace collmm_cli_test {

struct CommandResult {
  int rc = -1;         // exit status (128 + signal when killed)
  std::string output;  // stdout and stderr together
  double seconds = 0;
};

// Runs `command` through sh, stopped after `limit_s` seconds (coreutils timeout: rc 124 then).
inline CommandResult run_command(const std::string& command, int limit_s) {
  CommandResult r;
  const std::string line = "timeout -k 5 " + std::to_string(limit_s) + " " + command + " 2>&1";
  const auto start = std::chrono::steady_clock::now();
  FILE* pipe = popen(line.c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed: " + line);
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, got);
  const int status = pclose(pipe);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// The job's exit code. Open MPI 4.1's mpiexec, after an MPI_ABORT, sometimes crashes itself in its
// cleanup (SIGSEGV in PMIx_server_finalize, seen on the loaded CI machine): the rank's code is then
// in its abort message ("with errorcode N"), and that is the job's. Any other result as it came.
inline int job_exit_code(const CommandResult& r) {
  const std::string abort = "MPI_ABORT was invoked on rank ";
  const std::string code = "with errorcode ";
  const size_t at = r.output.find(abort);
  const bool launcher_crashed = r.rc == 128 + SIGSEGV && r.output.find("PMIx_server_finalize") != std::string::npos;
  if (!launcher_crashed || at == std::string::npos) return r.rc;
  const size_t c = r.output.find(code, at);
  return c == std::string::npos ? r.rc : std::atoi(r.output.c_str() + c + code.size());
}

// "mpirun --oversubscribe --allow-run-as-root -np P" (the tests run on 2 cores as root in CI).
inline std::string mpirun(int np) {
  return std::string(COLLMM_MPIEXEC) + " --oversubscribe --allow-run-as-root -np " + std::to_string(np);
}

inline std::string bench() { return COLLMM_BENCH; }

// A new empty directory under the test's binary directory.
inline std::string fresh_dir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(COLLMM_TEST_OUT) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The PID of a stopped process (state T) whose command line holds `text`; -1 if none.
inline int stopped_process_with(const std::string& text) {
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = e.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmd(e.path() / "cmdline"), st(e.path() / "stat");
    std::string line((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>()), stat;
    std::getline(st, stat);
    const size_t paren = stat.rfind(')');
    if (line.find(text) != std::string::npos && paren != std::string::npos && stat.substr(paren + 2, 1) == "T")
      return std::stoi(pid);
  }
  return -1;
}

// A job started in the background (from `cwd`): its output goes to `log`, its exit code to `rc_file`
// (written when it ends). The test holds it (--debug-hang-rank) and goes on meanwhile.
struct BackgroundJob {
  std::string log, rc_file;

  BackgroundJob(const std::string& job, const std::string& cwd, const std::string& name)
      : log(cwd + "/" + name + ".log"), rc_file(cwd + "/" + name + ".rc") {
    const std::string line = "sh -c 'cd " + cwd + " && (" + job + " > " + log + " 2>&1; echo $? > " + rc_file +
                             ".part && mv " + rc_file + ".part " + rc_file + ") < /dev/null > /dev/null 2>&1 &'";
    if (run_command(line, 10).rc != 0) throw std::runtime_error("cannot start in the background: " + job);
  }

  // The PID of its stopped process whose command line holds `text`, waited for up to `limit_s`; -1 if none.
  static int held_with(const std::string& text, int limit_s) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(limit_s);
    for (;;) {
      const int pid = stopped_process_with(text);
      if (pid > 0 || std::chrono::steady_clock::now() > end) return pid;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  // Its exit code's line ("0\n"), waited for up to `limit_s` (the file appears whole: written
  // aside and renamed); "" if it has not ended by then.
  std::string exit_code(int limit_s) const {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(limit_s);
    while (!std::filesystem::exists(rc_file)) {
      if (std::chrono::steady_clock::now() > end) return "";
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return read_file(rc_file);
  }
};

inline size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A .npy file as read back: its header fields and its values as doubles.
struct Npy {
  std::string descr;
  int64_t rows = 0, cols = 0;
  size_t header_bytes = 0, file_bytes = 0;
  std::vector<double> v;
  double at(int64_t i, int64_t j) const { return v[static_cast<size_t>(i * cols + j)]; }
};

// Reads a version 1.0, C-order, 2-D '<f4' or '<f8' file; throws on anything else.
inline Npy read_npy(const std::string& path) {
  const std::string d = read_file(path);
  if (d.size() < 10 || d.compare(0, 6, "\x93NUMPY") != 0 || d[6] != 1 || d[7] != 0)
    throw std::runtime_error(path + ": not a .npy v1.0 file");
  Npy n;
  const size_t len = static_cast<unsigned char>(d[8]) | (static_cast<size_t>(static_cast<unsigned char>(d[9])) << 8);
  n.header_bytes = 10 + len;
  n.file_bytes = d.size();
  const std::string dict = d.substr(10, len);
  auto field = [&](const std::string& key) {
    const size_t at = dict.find("'" + key + "': ");
    if (at == std::string::npos) throw std::runtime_error(path + ": no " + key + " in " + dict);
    return dict.substr(at + key.size() + 4);
  };
  const std::string descr = field("descr");
  n.descr = descr.substr(1, descr.find('\'', 1) - 1);
  if (field("fortran_order").rfind("False", 0) != 0) throw std::runtime_error(path + ": Fortran order");
  if (std::sscanf(field("shape").c_str(), "(%ld, %ld)", &n.rows, &n.cols) != 2)
    throw std::runtime_error(path + ": shape is not 2-D: " + dict);
  const size_t count = static_cast<size_t>(n.rows * n.cols);
  const size_t elem = n.descr == "<f4" ? 4 : n.descr == "<f8" ? 8 : 0;
  if (elem == 0) throw std::runtime_error(path + ": unexpected descr " + n.descr);
  if (d.size() != n.header_bytes + count * elem) return n;  // the caller compares the sizes
  for (size_t i = 0; i < count; ++i) {
    const char* p = d.data() + n.header_bytes + i * elem;
    if (elem == 4) {
      float f;
      std::memcpy(&f, p, 4);
      n.v.push_back(f);
    } else {
      double x;
      std::memcpy(&x, p, 8);
      n.v.push_back(x);
    }
  }
  return n;
}

}  // namespace collmm_cli_test
