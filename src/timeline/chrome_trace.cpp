// chrome_trace.cpp: timeline gathering (events serialized as JSON arrays through
// HostComm::allgather) and the Chrome trace event format
// (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU).
#include "chrome_trace.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace collmm {
namespace {

using nlohmann::json;

json to_json(const TimelineEvent& e) {
  return json::array({e.rank, e.lane, static_cast<int>(e.kind), e.index, e.chunk, e.start_us, e.end_us});
}

TimelineEvent from_json(const json& j) {
  TimelineEvent e;
  e.rank = j.at(0).get<int>();
  e.lane = j.at(1).get<int>();
  e.kind = static_cast<StepKind>(j.at(2).get<int>());
  e.index = j.at(3).get<int>();
  e.chunk = j.at(4).get<int>();
  e.start_us = j.at(5).get<double>();
  e.end_us = j.at(6).get<double>();
  return e;
}

std::string lane_name(int lane, int lanes) {
  if (lane == 0) return "comm";
  return lanes > 2 ? "gemm lane " + std::to_string(lane) : "gemm";
}

}  // namespace

Timeline gather_timeline(HostComm& host, const Timeline& mine) {
  json events = json::array();
  for (const TimelineEvent& e : mine.events) events.push_back(to_json(e));
  Timeline all = mine;
  all.events.clear();
  for (const std::string& s : host.allgather(events.dump()))
    for (const json& j : json::parse(s)) all.events.push_back(from_json(j));
  std::stable_sort(all.events.begin(), all.events.end(), [](const TimelineEvent& a, const TimelineEvent& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.start_us < b.start_us;
  });
  return all;
}

std::string event_name(Op op, Algo algo, const TimelineEvent& e) {
  std::string name = to_string(op) + " " + to_string(algo);
  if (e.index >= 0) name += " step " + std::to_string(e.index);
  if (e.chunk >= 0) name += " chunk " + std::to_string(e.chunk);
  return name + " " + to_string(e.kind);
}

json chrome_trace(const std::vector<Timeline>& cases) {
  json events = json::array();
  std::set<int> ranks;
  std::map<int, std::set<int>> lanes_of;  // rank -> lanes seen
  int max_lane = 0;
  double offset = 0;
  for (const Timeline& t : cases) {
    double end = 0;
    for (const TimelineEvent& e : t.events) {
      events.push_back({{"name", event_name(t.op, t.algo, e)},
                        {"cat", e.counts_as_comm() ? "comm" : "gemm"},
                        {"ph", "X"},
                        {"pid", e.rank},
                        {"tid", e.lane},
                        {"ts", offset + e.start_us},
                        {"dur", std::max(0.0, e.end_us - e.start_us)},
                        {"args",
                         {{"op", to_string(t.op)},
                          {"algo", to_string(t.algo)},
                          {"kind", to_string(e.kind)},
                          {"step", e.index},
                          {"chunk", e.chunk},
                          {"lane", e.lane}}}});
      ranks.insert(e.rank);
      lanes_of[e.rank].insert(e.lane);
      max_lane = std::max(max_lane, e.lane);
      end = std::max(end, e.end_us);
    }
    offset += end * 1.1;
  }
  for (int r : ranks) {
    events.push_back(
        {{"name", "process_name"}, {"ph", "M"}, {"pid", r}, {"args", {{"name", "rank " + std::to_string(r)}}}});
    events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", r}, {"args", {{"sort_index", r}}}});
    for (int lane : lanes_of[r])
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", r},
                        {"tid", lane},
                        {"args", {{"name", lane_name(lane, max_lane + 1)}}}});
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

}  // namespace collmm
