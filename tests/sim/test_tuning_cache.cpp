// test_tuning_cache.cpp: the tuning cache's file under concurrent writers: processes
// that update one cache at once lose none of each other's entries and never leave a file that does
// not parse; bad entries are refused naming the file and the entry.
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <thread>

#include "tuning.hpp"

namespace collmm {
namespace {

TuningEntry entry(int writer, int i) {
  return {.problem = {.op = Op::ag_gemm, .m = 64 + writer, .n = 64, .k = 64 + i, .world = 2},
          .dtype = Dtype::f32,
          .options = {.algo = Algo::ring},
          .time_us = 1.0 + i};
}

TEST(TuningCacheFile, ConcurrentWritersLoseNothing) {
  const std::string path = testing::TempDir() + "collmm_tuning_concurrent.json";
  std::remove(path.c_str());
  constexpr int kWriters = 6, kUpdates = 25;
  std::vector<pid_t> children;
  for (int w = 0; w < kWriters; ++w) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 0;
      try {
        for (int i = 0; i < kUpdates; ++i) {
          update_tuning_cache(path, {entry(w, i)}, 30);
          load_tuning_cache(path);  // every reader, at any moment, sees a whole file
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "writer %d: %s\n", w, e.what());
        rc = 1;
      }
      std::_Exit(rc);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a writer failed";
  }
  const TuningCache cache = load_tuning_cache(path);
  std::set<std::pair<int64_t, int64_t>> seen;
  for (const TuningEntry& e : cache.entries) seen.insert({e.problem.m, e.problem.k});
  EXPECT_EQ(cache.entries.size(), static_cast<size_t>(kWriters * kUpdates));
  EXPECT_EQ(seen.size(), static_cast<size_t>(kWriters * kUpdates));
  std::remove(path.c_str());
  std::remove((path + ".lock").c_str());
}

TEST(TuningCacheFile, BadEntriesNameTheFileAndTheEntry) {
  auto message = [](const std::string& text) {
    try {
      parse_tuning_cache(text, "c.json");
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string good =
      R"({"op":"ag_gemm","m":64,"n":64,"k":64,"world_size":2,"dtype":"f32","algo":"ring","time_us":5})";
  // `good` with one key's value replaced (a key given twice is refused: see the end).
  auto with = [&](const char* key, const char* value) {
    nlohmann::json j = nlohmann::json::parse(good);
    j[key] = nlohmann::json::parse(value);
    return j.dump();
  };
  EXPECT_EQ(message(R"({"entries":[)" + good + "]}"), "accepted");
  EXPECT_EQ(message(R"({"entries":[)" + good + "," + with("gemm_lanes", "100000") + "]}"),
            "tuning cache 'c.json': entry 1: gemm_lanes 100000 is not 1..64");
  EXPECT_NE(message(R"({"entries":[{"op":"ag_gemm"}]})").find("tuning cache 'c.json': entry 0: "), std::string::npos);
  EXPECT_EQ(message("[]"), "tuning cache 'c.json': no \"entries\" list");
  EXPECT_NE(message(R"({"entries":[)" + with("world_size", "0") + "]}").find("world_size 0"), std::string::npos);
  // Text that is not JSON: the place of the first error, in nlohmann's words without its code.
  EXPECT_EQ(message("{\"entries\": [ {"),
            "tuning cache 'c.json' is not valid JSON: parse error at line 1, column 16: syntax error while parsing "
            "object key - unexpected end of input; expected string literal");
  // A value of the wrong type names its key; an absent key is named too; no nlohmann code anywhere.
  const std::string no_k = R"({"op":"ag_gemm","m":64,"n":64,"world_size":2,"dtype":"f32","algo":"ring","time_us":5})";
  for (const auto& [text, want] :
       {std::pair{R"({"entries":[)" + no_k + "]}", std::string("tuning cache 'c.json': entry 0: key 'k' not found")},
        std::pair{std::string(R"({"entries":[{"op":"ag_gemm","m":64,"n":64,"k":64,"world_size":2,"dtype":7,)"
                              R"("algo":"ring","time_us":5}]})"),
                  std::string("tuning cache 'c.json': entry 0: \"dtype\": 7 is not a name")},
        std::pair{R"({"entries":[)" + with("algo", R"(["ring"])") + "]}",
                  std::string("tuning cache 'c.json': entry 0: \"algo\": a list of 1 value(s) is not a name")},
        std::pair{R"({"entries":[)" + with("time_us", R"("5")") + "]}",
                  std::string("tuning cache 'c.json': entry 0: \"time_us\": \"5\" is not a number")},
        std::pair{std::string(R"({"entries":[3]})"),
                  std::string("tuning cache 'c.json': entry 0: not an object (got 3)")}}) {
    EXPECT_EQ(message(text), want) << text;
    EXPECT_EQ(message(text).find("json.exception"), std::string::npos) << text;
  }
  // A key given twice in one entry (nlohmann alone would keep the last one) is refused.
  EXPECT_EQ(message(R"({"entries":[)" + good.substr(0, good.size() - 1) + R"(,"m":128}]})"),
            "tuning cache 'c.json': 'entries[0].m' is given twice");
  // An empty file (no bytes, or white space only) is an empty cache, as a missing file is.
  for (const char* empty : {"", " \n\t\r\n"}) {
    EXPECT_EQ(message(empty), "accepted");
    EXPECT_TRUE(parse_tuning_cache(empty, "c.json").entries.empty());
  }
}

// A cache written before waves had their own key kept gemm_ar's ring's waves in "stages": read as
// waves; with "waves" given, "stages" on that ring is refused with the waves' name.
TEST(TuningCacheFile, OldWavesInStagesAreReadAsWaves) {
  const std::string ar = R"({"op":"gemm_ar","m":64,"n":64,"k":64,"world_size":2,"dtype":"f32","algo":"ring",)";
  const TuningCache old = parse_tuning_cache(R"({"entries":[)" + ar + R"("stages":2,"time_us":5}]})", "c.json");
  ASSERT_EQ(old.entries.size(), 1u);
  EXPECT_EQ(old.entries[0].options.waves, 2);
  EXPECT_EQ(old.entries[0].options.stages, 0);
  try {
    parse_tuning_cache(R"({"entries":[)" + ar + R"("stages":2,"waves":0,"time_us":5}]})", "c.json");
    ADD_FAILURE() << "the ring's stages were accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("its waves are the option waves"), std::string::npos) << e.what();
  }
}

TEST(TuningCacheFile, AHeldLockIsWaitedForThenReported) {
  const std::string path = testing::TempDir() + "collmm_tuning_locked.json";
  std::remove(path.c_str());
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // holds the lock for 3 s
    FILE* f = std::fopen((path + ".lock").c_str(), "w");
    flock(fileno(f), LOCK_EX);
    (void)!write(ready[1], "x", 1);
    sleep(3);
    std::_Exit(0);
  }
  char x;
  ASSERT_EQ(read(ready[0], &x, 1), 1);
  try {
    update_tuning_cache(path, {entry(0, 0)}, 1);
    ADD_FAILURE() << "the lock was not waited for";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("another job has held it for 1 s"), std::string::npos) << e.what();
  }
  int status = 0;
  waitpid(pid, &status, 0);
  update_tuning_cache(path, {entry(0, 0)}, 1);  // free again
  EXPECT_EQ(load_tuning_cache(path).entries.size(), 1u);
  std::remove(path.c_str());
  std::remove((path + ".lock").c_str());
}

}  // namespace
}  // namespace collmm
