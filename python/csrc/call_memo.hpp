// call_memo.hpp: what a session's op calls settled before data moved. agree(): the ranks' one
// exchange for a call (src/common/agreement.hpp: any rank's misfit, the keys every rank must share, each
// rank's numbers), with the fingerprints agreed so far. recall() and remember(): the memo of a call
// by its CallKey, so that a call like one before skips its checks and planning. The rules of
// set_check ("every", "first") and of CUDA graph capture for them are here.
//
// Two maps, keyed two ways, because one would change what exchanges:
// - A fingerprint (the call's name, keys and this rank's numbers) is what agree() skips the exchange
//   on (check "first", capture). Calls of different CallKeys share one (other strides of the same
//   sizes, other Bs after the first): such a call skips the exchange where its fingerprint is known,
//   though its key never ran (under capture: runs instead of throwing). A fingerprint is also known after an
//   exchange whose call then failed (its problem did not fit) and left no memo.
// - A memo (by CallKey) holds what the call's key fixes (its keys and numbers) and its plan. A
//   fingerprint agreed again with other ranks' numbers drops every memo (they hold the old numbers).
// Both are bounded (kMaxKnown, cleared the same on every rank); the memos also go when a plan they
// point to is dropped (forget(), plan_cache.hpp).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <c10/core/Device.h>
#include <c10/util/Exception.h>

#include "host_comm.hpp"
#include "plan_cache.hpp"

namespace collmm::torch_ext {

using Keys = std::vector<std::pair<std::string, std::string>>;
using Agreed = std::vector<std::vector<double>>;  // every rank's numbers, in rank order

// A call's inputs as numbers: every property of its tensors and arguments that its checks, its
// agreement's keys and numbers, and its plan depend on (the op, sizes, strides, dtype, device,
// dims, algo, sizes given). Two calls with the same CallKey check, agree and plan alike.
using CallKey = std::vector<int64_t>;
// What a call with that key settled before data moved: every rank's agreed numbers, the plan, and
// what this rank sent to agree (the call's name, keys and numbers; their fingerprint).
struct CallMemo {
  Agreed all;
  Prepared* prepared = nullptr;
  std::string call, print;
  Keys keys;
  std::vector<double> mine;
  std::string auto_report;  // with algo "auto": its decision as last_auto() reports it
};
// What recall() found for a call: the memo it may run on, or (check "every") the exchange of what
// the call with its key sent, where a rank's numbers came back changed.
struct Recalled {
  const CallMemo* memo = nullptr;
  std::optional<Agreed> exchanged;
};

class CallMemos {
 public:
  // `host`: the session's exchanges; `device`: its tensors' (capture is its current stream's).
  CallMemos(HostComm& host, c10::Device device) : host_(host), device_(device) {}

  // The memo of a call with this key where the call may skip its checks, agreement and planning;
  // else no memo: the call does all of it, then remember()s it.
  // - Under check "first" or CUDA graph capture (a fingerprint agreed before exchanges nothing): the
  //   memo of a call with this key that ran before. Every memo's fingerprint is among the agreed
  //   ones, so whether a call exchanges is decided as agree() decides it, the same on every rank.
  // - Under check "every", where a call with this key ran before: one exchange of what that call
  //   sent (the same as the checks would send again: the key fixes them), so the per-call cost is
  //   the exchange alone. The memo where every rank's numbers came back as then; else no memo and
  //   the exchange's result, for the call to plan from instead of exchanging again. Any rank's
  //   mismatch throws UsageError on every rank, as agree() does.
  Recalled recall(const CallKey& key);
  // Every rank's numbers for the call named `call`: the recalled memo's or exchange's; else
  // agree(call, misfit, keys(), mine). A recalled call passed its checks: `misfit` is "".
  template <class KeysOf>
  Agreed agree(const Recalled& recalled, const std::string& call, const std::string& misfit, const KeysOf& keys,
               const std::vector<double>& mine) {
    if (recalled.memo) return recalled.memo->all;
    TORCH_INTERNAL_ASSERT(!recalled.exchanged || misfit.empty(), "collmm: a recalled call failed its checks: ", misfit);
    if (recalled.exchanged) return *recalled.exchanged;
    return agree(call, misfit, keys(), mine);
  }
  // The exchange for one call named `call` (agree_and_gather: any rank's `misfit`, the keys every
  // rank must share, each rank's `mine`), remembered per fingerprint (keys and mine). A fingerprint
  // agreed before skips the exchange under CUDA graph capture, and on every call after
  // set_check("first"); under capture an unknown one throws UsageError (capture forbids the first
  // call's work). Returns every rank's `mine`.
  Agreed agree(const std::string& call, const std::string& misfit, const Keys& keys, const std::vector<double>& mine);
  // auto's decision for the call being made ("" for another algo), remembered with it.
  void set_auto_report(const std::string& report) { making_.auto_report = report; }
  // Records the call (its agreement as the last agree() or recall() exchanged it) with its plan.
  void remember(const CallKey& key, const Agreed& all, Prepared& prepared);
  // Drops every memo (a plan they may point to goes).
  void forget() { memos_.clear(); }
  // The name of the call being made ("" before the first).
  const std::string& call() const { return making_.call; }
  // The call being made is this process's `number`-th on the group (count_call): every exchange
  // carries it, so ranks whose calls are out of step raise on every rank.
  void set_call_number(int64_t number) { number_ = number; }

 private:
  static constexpr size_t kMaxKnown = 256;
  // The exchange's result `all` for fingerprint `print`, noted as agreed.
  void note_agreed(const std::string& print, const Agreed& all);
  // agree_and_gather with the call number among the keys (not in the fingerprints: they stay per problem).
  Agreed exchange(const std::string& misfit, const Keys& keys, const std::vector<double>& mine);

  HostComm& host_;
  c10::Device device_;
  std::map<std::string, Agreed> known_;  // agreed fingerprints, their gathered numbers
  std::map<CallKey, CallMemo> memos_;    // cleared with known_ and whenever a prepared plan is dropped
  CallMemo making_;                      // the call being made: what its exchange sent (call, print, keys, mine)
  int64_t number_ = 0;                   // set_call_number's
};

// Counts a call on the group named `group_name` by this process and returns its number (1, 2, ...).
// Every op call counts as it starts, before anything can fail on this rank alone; so do the Python
// wrappers' calls that fail their own checks (torch.ops.collmm.count_call). A rank that skipped a
// call (its exception caught) is then behind the others, and the next exchange names it.
int64_t count_call(const std::string& group_name);

// "every" (the default: every call agrees) or "first" (a call whose fingerprint this session agreed
// before trusts it and exchanges nothing, as torch.ops.symm_mem trusts its callers).
void set_check(const std::string& check);

}  // namespace collmm::torch_ext
