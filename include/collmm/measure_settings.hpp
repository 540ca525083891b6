// collmm/measure_settings.hpp: how `auto` times its candidates (MeasureSettings: runs, margins, the
// runoff and the tie), and what it decided for a shape (AutoDecision). The settings of the public
// API (collmm/collmm.hpp's AutoSettings); the timing itself is src/sim/measured_choice.hpp's.
#pragma once

#include <string>

#include "collmm/types.hpp"

namespace collmm {

enum class AutoMeasure { off, on };                  // off: the model's (or the cache's) pick alone
AutoMeasure parse_auto_measure(const std::string&);  // "on" | "off"; UsageError otherwise
std::string to_string(AutoMeasure);

// Measured times within (1 + kTieMargin) x the fastest are a tie (pick_measured, src/sim/tuning.hpp).
constexpr double kTieMargin = 0.01;

struct MeasureSettings {
  AutoMeasure measure = AutoMeasure::on;
  int warmup = 1;          // untimed runs per candidate
  int iters = 3;           // timed runs per candidate: their median is the process's time
  int max_candidates = 4;  // sequential included
  double margin = 0.25;    // candidates predicted within (1 + margin) x the best prediction
  // The runoff: after the first pass, the candidates measured within (1 + runoff_margin) x the
  // fastest are timed again while two or more stay that close. That is up to runoff_passes more
  // passes, each in the other order; a candidate's time is the median of its passes. One pass's
  // outlier (a run of 8% measured on the host bed) then cannot decide between candidates 2-5%
  // apart.
  double runoff_margin = 0.05;
  int runoff_passes = 2;
  // A tie: candidates measured within (1 + tie_margin) x the fastest. The tie goes to the plan of
  // fewest host steps (Alternative::steps): the same device time within the noise, less host work
  // per call (each step is a launch or a transfer the host issues), what a training step's host sees.
  double tie_margin = kTieMargin;
};

// Auto's decision for one shape: the options it runs, where they came from and what it printed.
struct AutoDecision {
  PlanOptions options;
  std::string source;   // "model", or "measured" (timed here, or the cache's times)
  std::string printed;  // print(Choice), and print(MeasuredChoice) when timed
};

}  // namespace collmm
