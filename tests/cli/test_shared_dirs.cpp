// test_shared_dirs.cpp: another user's file in a sticky world-writable directory (as in /tmp), as
// collmm-bench run by an unprivileged user (65534, through runuser or setpriv) finds it. The
// sticky bit lets that user write into root's 0666 file but not rename over it, and collmm
// replaces every file it writes:
// - --json, --tune-cache and --save onto such a file are refused before any work (exit 2, the
//   reason given), the file as it was (before: the run went on and lost its results at the end);
// - a final write that still fails (the file made by root while the job was held after its
//   check) keeps the results beside it, under a name the message gives (before: lost).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "harness.hpp"

using namespace collmm_cli_test;

namespace {

const std::string kJob = " --op ag_gemm --algo ring -m 64 -n 64 -k 64 -w 1 -i 2 --timeout 60";

bool has(const CommandResult& r, const std::string& text) { return r.output.find(text) != std::string::npos; }

// The command prefix that runs as user 65534; "" where this test cannot switch.
std::string as_nobody() {
  if (::geteuid() != 0) return "";
  for (const std::string prefix : {"runuser -u nobody -- ", "setpriv --reuid=65534 --regid=65534 --clear-groups "})
    if (run_command(prefix + "true", 10).rc == 0) return prefix;
  return "";
}

// A new sticky directory under /tmp, mode 01777, owned by root; removed when it goes.
struct StickyDir {
  std::string path;
  StickyDir() {
    char name[] = "/tmp/collmm-sticky-XXXXXX";
    if (!::mkdtemp(name)) throw std::runtime_error("mkdtemp");
    path = name;
    ::chmod(name, 01777);
  }
  ~StickyDir() { std::filesystem::remove_all(path); }
};

// A root-owned file holding `text`, mode 0666 (every user may write it).
void shared_file(const std::string& path, const std::string& text) {
  { std::ofstream(path) << text; }
  ::chmod(path.c_str(), 0666);
}

TEST(SharedDirs, AFileThisUserCannotReplaceIsRefusedBeforeWork) {
  const std::string nobody = as_nobody();
  if (nobody.empty()) GTEST_SKIP() << "cannot switch to an unprivileged user here";
  StickyDir dir;
  shared_file(dir.path + "/r.json", "previous");
  shared_file(dir.path + "/c.json", "{\"entries\": []}\n");
  shared_file(dir.path + "/ag_gemm-ring-rank0-C.npy", "previous");
  for (const std::string& args :
       {"--json " + dir.path + "/r.json", "--tune-cache " + dir.path + "/c.json", "--save " + dir.path}) {
    const CommandResult r = run_command(
        "sh -c 'cd " + dir.path + " && " + nobody + mpirun(2) + " " + bench() + kJob + " " + args + "'", 120);
    EXPECT_EQ(r.rc, 2) << args << "\n" << r.output;
    EXPECT_TRUE(has(r, "in the sticky directory '" + dir.path + "', where only its owner may replace it")) << r.output;
    EXPECT_TRUE(has(r, "nothing was run")) << r.output;
    EXPECT_FALSE(has(r, "# Avg")) << "the job ran: " << r.output;
  }
  EXPECT_EQ(read_file(dir.path + "/r.json"), "previous");
  EXPECT_EQ(read_file(dir.path + "/c.json"), "{\"entries\": []}\n");
  EXPECT_EQ(read_file(dir.path + "/ag_gemm-ring-rank0-C.npy"), "previous");
  // The file's owner (root) may replace it.
  const CommandResult r = run_command(mpirun(2) + " " + bench() + kJob + " --json " + dir.path + "/r.json", 120);
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(read_file(dir.path + "/r.json").find("\"algo\": \"ring\""), std::string::npos);
}

TEST(SharedDirs, AFinalWriteThatFailsKeepsTheResultsBesideTheFile) {
  const std::string nobody = as_nobody();
  if (nobody.empty()) GTEST_SKIP() << "cannot switch to an unprivileged user here";
  StickyDir dir;
  const std::string out = dir.path + "/r.json";
  // The job (user 65534) is held in its check of `out`, absent then; root makes `out` meanwhile.
  const std::string job =
      nobody + mpirun(2) + " " + bench() + kJob + " --json " + out + " --debug-hang-rank 0 --debug-phase probe";
  const BackgroundJob bg(job, dir.path, "job");
  const int held = BackgroundJob::held_with(out, 60);
  ASSERT_GT(held, 0) << "the job was not held in its check";
  shared_file(out, "root's");
  ::kill(held, SIGCONT);
  const std::string rc = bg.exit_code(120);
  const std::string log = read_file(bg.log);
  EXPECT_EQ(rc, "1\n") << log;
  EXPECT_EQ(read_file(out), "root's");
  const std::string kept = "what was to be written is kept in '" + out + ".tmp.";
  const size_t at = log.find(kept);
  ASSERT_NE(at, std::string::npos) << log;
  const std::string name = log.substr(at + kept.size() - (out.size() + 5), out.size() + 5 + 12);
  EXPECT_NE(read_file(name).find("\"algo\": \"ring\""), std::string::npos) << name;
}

}  // namespace
