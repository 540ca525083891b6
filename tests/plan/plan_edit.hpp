// plan_edit.hpp: small edits of a Plan for the checker's mutation tests. Steps move, appear and
// disappear with every `waits` index kept pointing at the same step.
#pragma once

#include <utility>
#include <vector>

#include "collmm/plan.hpp"
#include "plan_check.hpp"

namespace collmm::test {

inline std::vector<Plan> all_plans(const Problem& p, const PlanOptions& o) {
  std::vector<Plan> plans;
  for (int r = 0; r < p.world; ++r) plans.push_back(make_plan(p, o, r));
  return plans;
}

// Inserts `s` at position `at`; waits on steps from `at` on shift by one.
inline void insert_step(Plan& plan, int at, Step s) {
  for (Step& x : plan.steps)
    for (int& w : x.waits)
      if (w >= at) ++w;
  plan.steps.insert(plan.steps.begin() + at, std::move(s));
}

// Removes step `at`; waits on it are dropped.
inline void erase_step(Plan& plan, int at) {
  plan.steps.erase(plan.steps.begin() + at);
  for (Step& x : plan.steps) {
    std::vector<int> kept;
    for (int w : x.waits)
      if (w != at) kept.push_back(w > at ? w - 1 : w);
    x.waits = kept;
  }
}

// Exchanges steps i and i + 1 (waits follow the steps they name).
inline void swap_steps(Plan& plan, int i) {
  std::swap(plan.steps[i], plan.steps[i + 1]);
  for (Step& x : plan.steps)
    for (int& w : x.waits) w = w == i ? i + 1 : w == i + 1 ? i : w;
}

// Splits sendrecv step i into a send-only step and a receive-only step right after it, on the same
// lane; steps that waited for the group wait for the second of them.
inline void split_sendrecv(Plan& plan, int i) {
  Step recv = plan.steps[i];
  recv.sends.clear();
  plan.steps[i].recvs.clear();
  insert_step(plan, i + 1, recv);
  for (size_t x = i + 2; x < plan.steps.size(); ++x)
    for (int& w : plan.steps[x].waits)
      if (w == i) w = i + 1;
}

// The index of the first step of `kind` with the given algorithm step number (-1: any).
inline int find_step(const Plan& plan, StepKind kind, int index = -1) {
  for (size_t i = 0; i < plan.steps.size(); ++i)
    if (plan.steps[i].kind == kind && (index < 0 || plan.steps[i].index == index)) return static_cast<int>(i);
  return -1;
}

}  // namespace collmm::test
