// chrome_trace.hpp: timelines of every rank gathered to one place, and written as a Chrome-trace
// JSON (chrome://tracing, https://ui.perfetto.dev): pid = rank, tid = lane (lane 0 "comm", lanes
// 1.. "gemm"), one complete ("X") event per executed step, times in microseconds.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "collmm/timeline.hpp"
#include "host_comm.hpp"

namespace collmm {

// Collective: every process contributes the events of its own ranks; every process gets the
// timeline of all ranks (sorted by rank, then start time).
Timeline gather_timeline(HostComm& host, const Timeline& mine);

// "ag_gemm ring step 2 chunk 3 gemm" (step / chunk left out where the step has none).
std::string event_name(Op op, Algo algo, const TimelineEvent& e);

// One trace of several timelines (one per op x algo case) laid end to end on the time axis, each
// starting where the previous one ended plus a gap of a tenth of its length.
nlohmann::json chrome_trace(const std::vector<Timeline>& cases);

}  // namespace collmm
