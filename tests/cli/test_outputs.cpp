// test_outputs.cpp: collmm-bench's outputs never destroy what collmm did not write.
// - --save DIR adds its files beside a user's file and subdirectory (both kept) and replaces only
//   its own on a second save (their mode kept); --save . works;
// - a character device (a private node made with mknod where the test runs as root, else
//   /dev/null and /dev/full) and a FIFO with a reader are written through, never replaced; a FIFO
//   without a reader is refused before the run (exit 2), the probe never blocking;
// - the temporary's name cannot be planted: symbolic links to a private file under the old names
//   (PATH.tmp.<pid>) for the next few hundred PIDs, planted by root and, where setpriv can switch,
//   by an unprivileged user in a sticky world-writable directory, leave that file as it was;
// - a rewrite keeps the file's mode and owner; a link to a file: the file replaced, the link kept;
//   a dangling link is named as one;
// - two jobs on one tuning cache, one held in its probe while the other writes: both jobs' rows kept;
// - a full file system (a 64 KiB tmpfs, where the test may mount one): exit 1 naming the file, the
//   previous file whole, no temporary left.
// The figures are printed ("outputs: ...") for docs/reliability.md.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include <nlohmann/json.hpp>

#include "harness.hpp"

using namespace collmm_cli_test;

namespace {

const std::string kJob = " --op ag_gemm --algo ring -m 64 -n 64 -k 64 -w 1 -i 2 --timeout 20";

bool has(const CommandResult& r, const std::string& text) { return r.output.find(text) != std::string::npos; }

struct stat stat_of(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) throw std::runtime_error("cannot stat " + path);
  return st;
}

CommandResult bench_job(const std::string& args, int limit_s = 60) {
  return run_command(mpirun(2) + " " + bench() + kJob + " " + args, limit_s);
}

// Files in `dir` whose names start with `prefix`.
int count_named(const std::string& dir, const std::string& prefix) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    n += e.path().filename().string().rfind(prefix, 0) == 0;
  return n;
}

TEST(Outputs, SaveKeepsWhatTheDirectoryHolds) {
  const std::string dir = fresh_dir("save_keep");
  std::filesystem::create_directories(dir + "/sub");
  { std::ofstream(dir + "/thesis.txt") << "x"; }
  { std::ofstream(dir + "/sub/notes") << "y"; }
  CommandResult r = bench_job("--save " + dir);
  ASSERT_EQ(r.rc, 0) << r.output;
  const std::string a = dir + "/ag_gemm-ring-rank0-A.npy";
  EXPECT_EQ(read_file(dir + "/thesis.txt"), "x");
  EXPECT_EQ(read_file(dir + "/sub/notes"), "y");
  const ino_t first = stat_of(a).st_ino;
  ::chmod(a.c_str(), 0640);
  r = bench_job("--save " + dir + " --seed 7");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(read_file(dir + "/thesis.txt"), "x");
  EXPECT_EQ(read_file(dir + "/sub/notes"), "y");
  EXPECT_NE(stat_of(a).st_ino, first) << "the second save did not replace " << a;
  EXPECT_EQ(stat_of(a).st_mode & 07777, 0640u);
  EXPECT_EQ(count_named(dir, ".collmm-"), 0);

  // --save . (it failed after the run and left "..partial").
  const std::string here = fresh_dir("save_dot");
  { std::ofstream(here + "/mine") << "z"; }
  r = run_command("sh -c 'cd " + here + " && " + mpirun(2) + " " + bench() + kJob + " --save .'", 60);
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(read_file(here + "/mine"), "z");
  EXPECT_TRUE(std::filesystem::exists(here + "/ag_gemm-ring-rank1-C.npy"));
  EXPECT_EQ(count_named(here, ".collmm-"), 0);
  EXPECT_EQ(count_named(std::filesystem::path(here).parent_path().string(), "..partial"), 0);
}

// A device node: a private one where the test may make it (root), else the system's.
std::string device(const std::string& dir, const char* name, unsigned minor) {
  if (::geteuid() != 0) return std::string("/dev/") + name;
  const std::string path = dir + "/" + name;
  if (::mknod(path.c_str(), S_IFCHR | 0666, makedev(1, minor)) != 0) throw std::runtime_error("mknod " + path);
  return path;
}

TEST(Outputs, ACharacterDeviceIsWrittenThroughNeverReplaced) {
  const std::string dir = fresh_dir("chardev");
  const std::string null = device(dir, "null", 3), full = device(dir, "full", 7);
  CommandResult r = bench_job("--json " + null + " --trace " + null);
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_TRUE(S_ISCHR(stat_of(null).st_mode)) << null << " was replaced";
  r = bench_job("--json " + full);
  std::printf("outputs: --json %s: exit %d\n", full.c_str(), r.rc);
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_TRUE(has(r, "cannot write '" + full + "' (No space left on device)")) << r.output;
  EXPECT_TRUE(S_ISCHR(stat_of(full).st_mode)) << full << " was replaced";
}

TEST(Outputs, AFifoIsWrittenThroughOrRefusedAtOnce) {
  const std::string dir = fresh_dir("fifo");
  const std::string fifo = dir + "/f";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  CommandResult r = bench_job("--json " + fifo, 30);
  std::printf("outputs: --json FIFO without a reader: exit %d after %.2f s\n", r.rc, r.seconds);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(has(r, "--json '" + fifo + "': cannot be written (it is a FIFO that no process reads)")) << r.output;
  EXPECT_LT(r.seconds, 10) << r.output;
  r = bench_job("--save " + fifo, 30);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(has(r, "cannot create directory '" + fifo + "' (it exists and is not a directory)")) << r.output;
  const std::string got = dir + "/got";
  r = run_command("sh -c 'cat " + fifo + " > " + got + " & sleep 0.3; " + mpirun(2) + " " + bench() + kJob +
                      " --json " + fifo + "; rc=$?; wait; exit $rc'",
                  60);
  std::printf("outputs: --json FIFO with a reader: exit %d after %.2f s\n", r.rc, r.seconds);
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(read_file(got).find("\"algo\": \"ring\""), std::string::npos) << read_file(got);
  EXPECT_TRUE(S_ISFIFO(stat_of(fifo).st_mode)) << fifo << " was replaced";
}

int last_pid() {
  std::ifstream in("/proc/sys/kernel/ns_last_pid");
  int pid = 0;
  in >> pid;
  return pid;
}

// Links to `victim` under the old temporary names of `out` (OUT.tmp.<pid>) for the next 400 PIDs,
// made by `as` (a command prefix: "" or setpriv's); then a job writes `out`.
void plant_and_write(const std::string& out, const std::string& victim, const std::string& as) {
  const int from = last_pid() + 1;
  const CommandResult planted =
      run_command(as + "sh -c 'i=" + std::to_string(from) + "; while [ $i -lt " + std::to_string(from + 400) +
                      " ]; do ln -s " + victim + " " + out + ".tmp.$i; i=$((i+1)); done'",
                  60);
  ASSERT_EQ(planted.rc, 0) << planted.output;
  const CommandResult r = bench_job("--json " + out);
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(read_file(victim), "secret") << "the planted link was followed";
  EXPECT_TRUE(S_ISREG(stat_of(out).st_mode));
  EXPECT_NE(read_file(out).find("\"algo\": \"ring\""), std::string::npos);
}

TEST(Outputs, PlantedTemporaryNamesAreNotFollowed) {
  const std::string dir = fresh_dir("planted");
  const std::string victim = dir + "/victim";
  { std::ofstream(victim) << "secret"; }
  ::chmod(victim.c_str(), 0600);
  plant_and_write(dir + "/r.json", victim, "");

  // An unprivileged user plants them in a sticky world-writable directory, as in /tmp.
  if (::geteuid() != 0 || run_command("setpriv --reuid=65534 --regid=65534 --clear-groups true", 10).rc != 0)
    GTEST_SKIP() << "cannot switch to an unprivileged user here";
  char shared[] = "/tmp/collmm-planted-XXXXXX";
  ASSERT_NE(::mkdtemp(shared), nullptr);
  ::chmod(shared, 01777);
  const std::string root_victim = std::string(shared) + "/victim";
  { std::ofstream(root_victim) << "secret"; }
  ::chmod(root_victim.c_str(), 0600);
  plant_and_write(std::string(shared) + "/r.json", root_victim, "setpriv --reuid=65534 --regid=65534 --clear-groups ");
  std::filesystem::remove_all(shared);
}

TEST(Outputs, ARewriteKeepsModeOwnerAndLinks) {
  const std::string dir = fresh_dir("mode_owner");
  const std::string out = dir + "/r.json";
  { std::ofstream(out) << "old"; }
  ::chmod(out.c_str(), 0664);
  const bool root = ::geteuid() == 0;
  if (root) {
    ASSERT_EQ(::chown(out.c_str(), 65534, 65534), 0);
  }
  CommandResult r = bench_job("--json " + out);
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(read_file(out), "old");
  EXPECT_EQ(stat_of(out).st_mode & 07777, 0664u);
  if (root) {
    EXPECT_EQ(stat_of(out).st_uid, 65534u);
  }

  const std::string target = dir + "/target.json", link = dir + "/link.json";
  { std::ofstream(target) << "old"; }
  ASSERT_EQ(::symlink("target.json", link.c_str()), 0);
  r = bench_job("--json " + link);
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_TRUE(S_ISLNK(stat_of(link).st_mode)) << "the link was replaced";
  EXPECT_NE(read_file(target).find("\"algo\": \"ring\""), std::string::npos);

  const std::string dangling = dir + "/dangling.json";
  ASSERT_EQ(::symlink("nowhere/r.json", dangling.c_str()), 0);
  r = bench_job("--json " + dangling);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(has(r, "it is a symbolic link to 'nowhere/r.json', which does not exist")) << r.output;
  EXPECT_FALSE(has(r, "File exists")) << r.output;
  r = bench_job("--save " + dangling);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(has(r, "it is a symbolic link to 'nowhere/r.json', which does not exist")) << r.output;
}

// Job A is held (SIGSTOP) in its probe of the cache, between the probe's create and its unlink
// (which, when the probe was the cache's own name, deleted what another job wrote meanwhile); job B
// writes the cache; A goes on. Both jobs' rows are in the cache.
TEST(Outputs, TwoJobsOnOneCacheKeepBothJobsRows) {
  const std::string dir = fresh_dir("two_jobs");
  const std::string cache = dir + "/cache.json";
  const std::string job_a = mpirun(2) + " " + bench() +
                            " --op ag_gemm --algo ring -m 64 -n 64 -k 64 -w 1 -i 2 --timeout 60 --tune-cache " + cache +
                            " --debug-hang-rank 0 --debug-phase probe";
  const BackgroundJob a(job_a, dir, "a");
  const int held = BackgroundJob::held_with(cache, 30);
  ASSERT_GT(held, 0) << "job A was not held in its probe";
  const CommandResult b = run_command(
      mpirun(2) + " " + bench() + " --op gemm_rs --algo ring -m 64 -n 64 -k 64 -w 1 -i 2 --tune-cache " + cache, 60);
  EXPECT_EQ(b.rc, 0) << b.output;
  ::kill(held, SIGCONT);
  EXPECT_EQ(a.exit_code(60), "0\n") << read_file(a.log);
  const nlohmann::json j = nlohmann::json::parse(read_file(cache));
  int ag = 0, rs = 0;
  for (const auto& e : j.at("entries")) (e.at("op") == "ag_gemm" ? ag : rs) += 1;
  EXPECT_EQ(ag, 1) << j.dump(1);
  EXPECT_EQ(rs, 1) << j.dump(1);
}

// A 64 KiB tmpfs, filled: the write fails with the file named, exit 1, the previous file whole and
// no temporary left.
TEST(Outputs, AFullFileSystemIsAnErrorNamingTheFile) {
  const std::string dir = fresh_dir("full_fs");
  const std::string mnt = dir + "/mnt";
  std::filesystem::create_directories(mnt);
  if (run_command("mount -t tmpfs -o size=64k tmpfs " + mnt, 10).rc != 0) GTEST_SKIP() << "cannot mount a tmpfs here";
  struct Unmount {
    std::string at;
    ~Unmount() { run_command("umount " + at, 10); }
  } unmount{mnt};
  const std::string out = mnt + "/r.json";
  { std::ofstream(out) << "previous"; }
  {
    std::ofstream fill(mnt + "/fill", std::ios::binary);
    const std::string block(4096, 'x');
    for (int i = 0; i < 64 && fill.write(block.data(), block.size()) && fill.flush(); ++i) {
    }
  }
  const CommandResult r = bench_job("--json " + out);
  std::printf("outputs: --json on a full tmpfs: exit %d after %.2f s\n", r.rc, r.seconds);
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_TRUE(has(r, "cannot write '" + out + "' (No space left on device)")) << r.output;
  EXPECT_EQ(read_file(out), "previous");
  EXPECT_EQ(count_named(mnt, "r.json.tmp."), 0);
}

}  // namespace
