// call_memo.cpp: a session's agreed fingerprints and call memos, and the check setting.
#include "call_memo.hpp"

#include <atomic>
#include <mutex>
#include <sstream>

#include "agreement.hpp"
#include "torch_util.hpp"
#include "trace.hpp"

namespace collmm::torch_ext {
namespace {

std::atomic<bool> g_check_first{false};

// "key=value" lines and this rank's numbers: what a call's agreement depends on.
std::string fingerprint(const std::string& call, const Keys& keys, const std::vector<double>& mine) {
  std::ostringstream f;
  f << call << '\n';
  for (const auto& [k, v] : keys) f << k << '=' << v << '\n';
  for (double d : mine) f << d << ' ';
  return f.str();
}

}  // namespace

Agreed CallMemos::agree(const std::string& call, const std::string& misfit, const Keys& keys,
                        const std::vector<double>& mine) {
  host_.set_phase(call + "'s agreement");
  const bool capture = capturing(device_);
  if (capture && !misfit.empty()) throw UsageError(misfit);
  const std::string print = fingerprint(call, keys, mine);
  making_ = CallMemo{{}, nullptr, call, print, keys, mine, ""};
  if (misfit.empty() && (capture || g_check_first)) {  // a rank with an error always tells the others
    auto it = known_.find(print);
    if (it != known_.end()) return it->second;
  }
  if (capture)
    throw UsageError(call + " under CUDA graph capture with a problem this session never ran eagerly (" +
                     std::to_string(known_.size()) +
                     " known): run one eager call of every shape, dtype, layout and algo before capturing");
  auto all = exchange(misfit, keys, mine);
  note_agreed(print, all);
  return all;
}

void CallMemos::note_agreed(const std::string& print, const Agreed& all) {
  if (known_.size() >= kMaxKnown) known_.clear(), memos_.clear();  // the same on every rank
  // A fingerprint agreed again with other ranks' numbers (a rank's sizes changed under the same keys
  // of this rank, e.g. gather_dim -2 for 0): the memos, which hold the old numbers and their plan, go.
  auto it = known_.find(print);
  if (it != known_.end() && it->second != all) memos_.clear();
  known_.insert_or_assign(print, all);
}

Recalled CallMemos::recall(const CallKey& key) {
  Recalled recalled;
  auto it = memos_.find(key);
  if (it == memos_.end()) return recalled;
  const CallMemo& memo = it->second;
  if (g_check_first || capturing(device_)) {
    if (!memo.auto_report.empty()) note_last_auto(memo.auto_report);
    recalled.memo = &memo;
    return recalled;
  }
  host_.set_phase(memo.call + "'s agreement");
  Agreed all = exchange("", memo.keys, memo.mine);
  // A full known_ is cleared by note_agreed on every rank alike (the exchange of a rank that missed
  // the memo notes its numbers): so here too, and the call goes on as a miss.
  if (all == memo.all && known_.size() < kMaxKnown) {
    if (!memo.auto_report.empty()) note_last_auto(memo.auto_report);
    recalled.memo = &memo;
    return recalled;
  }
  making_ = memo;  // copied first: note_agreed may clear the memos
  note_agreed(making_.print, all);
  recalled.exchanged = std::move(all);
  return recalled;
}

Agreed CallMemos::exchange(const std::string& misfit, const Keys& keys, const std::vector<double>& mine) {
  Keys sent = keys;
  sent.emplace_back(
      "the number of collmm calls on this group so far (the ranks are out of step: a call failed on some rank "
      "alone and its exception was caught, so its next call would pair with another call; make a new group)",
      std::to_string(number_));
  return agree_and_gather(host_, misfit, sent, mine);
}

void CallMemos::remember(const CallKey& key, const Agreed& all, Prepared& prepared) {
  if (memos_.size() >= kMaxKnown) memos_.clear();
  CallMemo memo = making_;
  memo.all = all;
  memo.prepared = &prepared;
  memos_.insert_or_assign(key, std::move(memo));
}

int64_t count_call(const std::string& group_name) {
  static std::mutex mutex;
  static auto& counts = *new std::map<std::string, int64_t>();  // never destroyed, as the sessions
  std::lock_guard<std::mutex> lock(mutex);
  return ++counts[group_name];
}

void set_check(const std::string& check) {
  if (check != "every" && check != "first") throw UsageError("check must be every or first (got " + check + ")");
  g_check_first = check == "first";
}

}  // namespace collmm::torch_ext
