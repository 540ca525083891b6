// collmm/sizes.hpp: sizes as users type them ("8192", "8K", "1M") and the bounds every problem
// must keep. Each size, each product of two sizes (the element count of A, B or C) and P are
// bounded, so that no byte count overflows and no plan asks for more lanes or ranks than a machine
// can run.
// collmm-bench and collmm-sim parse -m, -n and -k with parse_size.
#pragma once

#include <climits>
#include <cstdint>
#include <string>

namespace collmm {

constexpr int64_t kMaxSize = int64_t(1) << 40;      // M, N and K each
constexpr int64_t kMaxElements = int64_t(1) << 56;  // M*K, K*N and M*N (bytes fit int64 at 8 per element)
constexpr int kMaxWorld = 1024;                     // P
constexpr int kMaxGemmLanes = 64;                   // --gemm-lanes (threads on cpu, streams on cuda)
constexpr int kMaxPieces = 64;                      // --pieces (transfers the ring's edge is cut into)
constexpr int kMaxHalvingPieces = 8;                // --pieces with halving sizes (the last is 1/128 of the chunk)
constexpr int kMaxWaves = 64;  // --waves (gemm_ar's ring): each wave adds P steps' fixed costs, none of
                               // them hidden, so more waves only cost time (32768 took 49 s a call)
// The run's other counts, one definition for the command lines, the library and the bindings.
constexpr int kMaxThreads = 1024;           // --threads: BLAS threads per rank
constexpr int kMaxIters = 1000000;          // -i and -w: timed and untimed iterations
constexpr int kMaxTimeout = 7 * 24 * 3600;  // --timeout, seconds
constexpr int64_t kMaxSeed = INT64_MAX;     // --seed (0 .. 2^63 - 1)
// The input files a user gives (--profile, --tune-cache): regular files only, at most this size
// (a 200000-entry cache is 22 MB), and JSON nested at most this deep (the files collmm writes: 4).
constexpr int64_t kMaxInputFileBytes = int64_t(256) << 20;
constexpr int kMaxJsonDepth = 64;

// A decimal count with an optional binary suffix K, M, G or T (either case: 8K = 8192, 1M =
// 1048576). Throws UsageError naming the text for anything else: a sign, spaces, an empty string,
// another suffix, or a value above kMaxSize.
int64_t parse_size(const std::string& text);

}  // namespace collmm
