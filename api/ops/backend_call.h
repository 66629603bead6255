// The call that hands an op to its backend, as the op gives it to the pipeline
// (ProcessGroup::issue): a reference to a callable on the op's stack, so that passing it
// allocates nothing (every op pays for this).
#pragma once

#include <type_traits>
#include <utility>

#include "api/ops/reduction_plan.h"

namespace distcomm {

class BackendCall {
 public:
  // f(Backend&, const ReductionPlan&, const OpContext&) -> WorkPtr; it must outlive the
  // call (a lambda passed straight to issue() does).
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, BackendCall>>>
  BackendCall(F&& f)  // NOLINT(google-explicit-constructor): passed as a lambda
      : object_(const_cast<void*>(static_cast<const void*>(&f))),
        invoke_([](void* object, Backend& b, const ReductionPlan& plan, const OpContext& ctx) -> WorkPtr {
          return (*static_cast<std::remove_reference_t<F>*>(object))(b, plan, ctx);
        }) {}

  WorkPtr operator()(Backend& b, const ReductionPlan& plan, const OpContext& ctx) const {
    return invoke_(object_, b, plan, ctx);
  }

 private:
  void* object_;
  WorkPtr (*invoke_)(void*, Backend&, const ReductionPlan&, const OpContext&);
};

}  // namespace distcomm
