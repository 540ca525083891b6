// test_crafted_inputs.cpp: input files and paths made to break collmm, refused before any work:
// - a tuning cache nested 60,000 levels deep, a profile field nested 100,000 deep (SIGSEGV
//   before): exit 2 naming the file, the field and the limit (kMaxJsonDepth), the message short;
// - a device that never ends (/dev/zero, or a private node where the test runs as root), a FIFO
//   and a 4 GiB sparse file as --profile or --tune-cache (read whole before): exit 2 at once;
// - a newline in an output path (--json $'d/x\ncollmm: all good' printed a forged line), an input
//   path, an --algo name or a key in a file: every message quotes paths with escapes and is printed
//   on one line, so no line of the output starts with the forged text.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "harness.hpp"

using namespace collmm_cli_test;

namespace {

const std::string kSim = std::string(COLLMM_SIM) + " -P 2 -m 64 -n 64 -k 64 --algo ring";
const std::string kJob = " --op ag_gemm --algo ring -m 64 -n 64 -k 64 -w 1 -i 2 --timeout 20";

bool has(const CommandResult& r, const std::string& text) { return r.output.find(text) != std::string::npos; }

// Whether any line of `text` starts with `start`.
bool a_line_starts_with(const std::string& text, const std::string& start) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(start, 0) == 0) return true;
  return false;
}

// `levels` lists nested in one another: "[[[...]]]".
std::string nested(size_t levels) { return std::string(levels, '[') + std::string(levels, ']'); }

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

TEST(CraftedInputs, ADeeplyNestedFileIsRefusedNamingTheFieldAndTheLimit) {
  const std::string dir = fresh_dir("crafted_deep");
  const std::string cache = dir + "/cache.json", profile = dir + "/profile.json";
  write(cache, "{\"entries\": " + nested(60000) + "}\n");
  write(profile, "{\"name\": \"deep\", \"notes\": " + nested(100000) + "}\n");
  CommandResult r = run_command(kSim + " --tune-cache " + cache, 60);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(has(r, "tuning cache '" + cache + "': the value at 'entries[0][0]")) << r.output;
  EXPECT_TRUE(has(r, "nested deeper than 64 levels")) << r.output;
  EXPECT_LT(r.output.size(), 1000u) << "the message holds the value";
  r = run_command(kSim + " --profile " + profile, 60);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(has(r, "profile '" + profile + "': the value at 'notes[0][0]")) << r.output;
  EXPECT_TRUE(has(r, "nested deeper than 64 levels")) << r.output;
  r = run_command(mpirun(2) + " " + bench() + kJob + " --tune-cache " + cache, 60);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(has(r, "nested deeper than 64 levels")) << r.output;
  r = run_command(mpirun(2) + " " + bench() + kJob + " --profile " + profile, 60);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(has(r, "nested deeper than 64 levels")) << r.output;

  // A value of the wrong type is shown cut short, never whole: a list by its size; a parse error's
  // token (a number of 100,000 digits) cut.
  std::string list = "[1";
  for (int i = 0; i < 50000; ++i) list += ",1";
  write(profile, "{\"name\": \"x\", \"gemm\": " + list + "]}\n");
  r = run_command(kSim + " --profile " + profile, 60);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(has(r, "gemm is not an object (got a list of 50001 value(s))")) << r.output;
  EXPECT_LT(r.output.size(), 1000u) << r.output.substr(0, 300);
  write(profile, "{\"name\": \"x\", \"memory_gbps\": 1" + std::string(100000, '0') + "}\n");
  r = run_command(kSim + " --profile " + profile, 60);
  EXPECT_EQ(r.rc, 2) << r.output.substr(0, 300);
  EXPECT_LT(r.output.size(), 1000u) << r.output.substr(0, 300);
}

TEST(CraftedInputs, OnlyARegularFileWithinTheLimitIsRead) {
  const std::string dir = fresh_dir("crafted_devices");
  std::string zero = "/dev/zero";
  if (::geteuid() == 0 && ::mknod((dir + "/zero").c_str(), S_IFCHR | 0666, makedev(1, 5)) == 0) zero = dir + "/zero";
  const std::string fifo = dir + "/fifo", sparse = dir + "/sparse.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  { std::ofstream(sparse) << ""; }
  ASSERT_EQ(::truncate(sparse.c_str(), int64_t(4) << 30), 0);
  struct Case {
    std::string path, why;
  };
  for (const Case& c :
       {Case{zero, "it is a character device, not a regular file"}, Case{fifo, "it is a FIFO, not a regular file"},
        Case{sparse, "it holds 4294967296 bytes, more than the limit of 268435456 bytes"}}) {
    for (const std::string option : {"--profile", "--tune-cache"}) {
      CommandResult r = run_command(kSim + " " + option + " " + c.path, 30);
      EXPECT_EQ(r.rc, 2) << option << " " << c.path << "\n" << r.output;
      EXPECT_TRUE(has(r, "'" + c.path + "'")) << r.output;
      EXPECT_TRUE(has(r, c.why)) << r.output;
      EXPECT_LT(r.seconds, 20) << option << " " << c.path;
      // collmm-bench: a FIFO as --tune-cache is refused as an output first (no process reads it).
      r = run_command(mpirun(2) + " " + bench() + kJob + " " + option + " " + c.path, 60);
      EXPECT_EQ(r.rc, 2) << option << " " << c.path << "\n" << r.output;
      EXPECT_TRUE(has(r, "'" + c.path + "'")) << r.output;
      EXPECT_TRUE(has(r, c.path == fifo ? "FIFO" : c.why)) << r.output;
    }
  }
  std::filesystem::remove(sparse);
}

TEST(CraftedInputs, ANewlineInAPathCannotForgeALine) {
  const std::string dir = fresh_dir("crafted_newline");
  const std::string forged = "collmm: all good";
  // An output whose directory is missing: refused before work, the path quoted.
  CommandResult r = run_command(mpirun(2) + " " + bench() + kJob + " --json '" + dir + "/none/x\n" + forged + "'", 60);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(has(r, "--json '" + dir + "/none/x\\n" + forged + "': cannot be written")) << r.output;
  EXPECT_FALSE(a_line_starts_with(r.output, forged)) << r.output;
  r = run_command(kSim + " --json '" + dir + "/none/x\n" + forged + "'", 30);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_FALSE(a_line_starts_with(r.output, forged)) << r.output;
  // An input file of such a name, refused for its content.
  const std::string bad = dir + "/p\n" + forged;
  write(bad, "{}");
  for (const std::string option : {"--profile", "--tune-cache"}) {
    r = run_command(kSim + " " + option + " '" + dir + "/p\n" + forged + "'", 30);
    EXPECT_EQ(r.rc, 2) << r.output;
    EXPECT_TRUE(has(r, "'" + dir + "/p\\n" + forged + "'")) << r.output;
    EXPECT_FALSE(a_line_starts_with(r.output, forged)) << r.output;
  }
  // A name refused by a parser that does not quote it: the front ends print every message on one line.
  r = run_command(std::string(COLLMM_SIM) + " -P 2 -m 64 -n 64 -k 64 --algo 'ring\n" + forged + "'", 30);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_FALSE(a_line_starts_with(r.output, forged)) << r.output;
  r = run_command(mpirun(2) + " " + bench() + " --op ag_gemm -m 64 -n 64 -k 64 --algo 'ring\n" + forged + "'", 60);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_FALSE(a_line_starts_with(r.output, forged)) << r.output;
  // A value inside a file: a key or a name holding a newline.
  write(dir + "/k.json", "{\"name\": \"n\\n" + forged + "\", \"gemm\\n" + forged + "\": 1}");
  r = run_command(kSim + " --profile " + dir + "/k.json", 30);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(has(r, "unknown field 'gemm\\n" + forged + "'")) << r.output;
  EXPECT_FALSE(a_line_starts_with(r.output, forged)) << r.output;
}

}  // namespace
