// op_call.hpp: the skeleton every op call of ops.cpp walks (run_call: check -> agree -> plan -> bind
// -> run) and what it takes of each op (CallBase and the steps an op's call struct has). Here too:
// the helpers the ops share (their CallKey, binding a tensor to a plan's buffer, UsageError as
// ValueError).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "collmm/plan.hpp"
#include "op_args.hpp"
#include "session.hpp"
#include "torch_util.hpp"

namespace collmm::torch_ext {

// A tensor's part of a CallKey: device, dtype, dims, sizes and strides.
inline void add_to_key(CallKey& key, const at::Tensor& t) {
  key.push_back(static_cast<int64_t>(t.device().type()));
  key.push_back(t.device().index());
  key.push_back(static_cast<int64_t>(t.scalar_type()));
  key.push_back(t.dim());
  key.insert(key.end(), t.sizes().begin(), t.sizes().end());
  key.insert(key.end(), t.strides().begin(), t.strides().end());
}
inline void add_to_key(CallKey& key, std::string_view text) {
  key.push_back(static_cast<int64_t>(text.size()));
  key.insert(key.end(), text.begin(), text.end());
}

inline void bind_buffer(Executor& ex, int buffer, const at::Tensor& t) {
  ex.bind(0, buffer, t.numel() ? t.data_ptr() : nullptr, static_cast<size_t>(t.numel() * t.element_size()));
}

// A tensor's type as the plan's output holds it (bf16 runs may accumulate into f32).
inline at::TensorOptions out_options(const at::Tensor& a, Executor& ex, Dtype dtype) {
  return a.options().dtype(scalar_type(ex.out_dtype(dtype)));
}

// Runs `fn`; a UsageError becomes ValueError("collmm: ...") in Python.
template <class F>
auto user_errors_as_value_errors(F fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const UsageError& e) {
    TORCH_CHECK_VALUE(false, "collmm: ", e.what());
  }
}

// `t` [rows, cols] as [rows / prod(inner), inner..., cols] with its first dim moved to `dim`.
inline at::Tensor shaped(const at::Tensor& t, at::IntArrayRef inner, int64_t dim) {
  if (inner.empty() && dim == 0) return t;
  std::vector<int64_t> sizes{t.size(0) / std::max<int64_t>(1, c10::multiply_integers(inner))};
  sizes.insert(sizes.end(), inner.begin(), inner.end());
  sizes.push_back(t.size(1));
  return t.view(sizes).movedim(0, dim);
}

// What every op call holds; each op's struct (AgCall, RsCall, ArCall) adds its arguments and the
// steps that run_call walks, in this order:
//   key(key)        its arguments' part of the CallKey (two calls with the same key check, agree and plan alike)
//   inspect(check)  this rank's views of its tensors (A with the dim gathered or scattered first) and, when
//                   `check`, the first misfit of its own arguments ("": none)
//   keys(), mine()  what every rank must share, and this rank's numbers (three for every op: the exchange has
//                   one size, so ranks calling different ops meet in it; every rank's come back as `all`)
//   problem(all)    the plan's Problem from every rank's numbers (UsageError where they do not fit together)
//   bind(prepared)  the caller's tensors and the outputs (made here) bound to the plan's buffers;
//                   bound() lists them (kept past a run that gave up transfers still writing into them)
//   result()        the outputs, after the run
struct CallBase {
  int rank = 0, world = 1;
  bool ready = false;  // inspect() made the views: this rank's arguments passed its checks
  Dtype dtype = Dtype::f32;
  int64_t rows = 0;  // the caller's M (the plan's may be padded), for the trace
};

// check -> agree -> plan -> bind -> run, for any op's call. A call whose CallKey ran before skips
// its checks and planning: recall() gives what that call settled (call_memo.hpp).
template <class Call>
auto run_call(Call& call, c10::string_view group_name, c10::Device device, c10::string_view algo_view) {
  return user_errors_as_value_errors([&] {
    const std::string algo(algo_view);
    const int64_t number = count_call(std::string(group_name));  // first: a failure below is counted
    SessionLock s = session_for(std::string(group_name), device);
    CallMemos& calls = s.session.calls();
    calls.set_call_number(number);
    call.rank = s.session.rank();
    call.world = s.session.world();
    CallKey key{static_cast<int64_t>(Call::op)};
    add_to_key(key, algo);
    call.key(key);
    const Recalled recalled = calls.recall(key);  // with check "every": one exchange
    const CallMemo* memo = recalled.memo;
    // check: this rank's own arguments (a recalled call passed them).
    std::string misfit = call.inspect(!memo);
    if (!memo && misfit.empty()) misfit = check_algo(algo, Call::op);
    // agree: one exchange of any rank's error, the keys every rank must share, each rank's sizes.
    const auto keys = [&] {
      Keys all_keys{{"op", Call::name}, {"device type", device.is_cpu() ? "cpu" : "cuda"}};
      for (auto& kv : call.keys()) all_keys.push_back(std::move(kv));
      all_keys.insert(all_keys.end(), {{"dtype", to_string(call.dtype)}, {"algo", algo}});
      return all_keys;
    };
    const Agreed all = calls.agree(recalled, Call::name, misfit, keys, call.mine());
    // plan: the problem from every rank's numbers, its plan prepared once per shape.
    const Problem problem = call.problem(all);
    Prepared& prepared =
        memo ? *memo->prepared : s.session.prepare(problem, s.session.options(problem, call.dtype, algo), call.dtype);
    if (!memo) calls.remember(key, all, prepared);
    // bind, then run.
    call.bind(prepared);
    s.session.run(prepared, call.dtype, call.rows, call.bound());
    return call.result();
  });
}

}  // namespace collmm::torch_ext
