// ProcessGroup's op pipeline: issue(), which every op of process_group_ops.cc goes through
// (route, plan, the refusal once the group failed, numbering, recording, the backend's
// call, the record of what the op writes), and its parts.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "api/diagnostics/work_marks.h"
#include "api/errors.h"
#include "api/errors_internal.h"
#include "api/group/group_backends.h"
#include "api/ops/argument_checks.h"
#include "api/ops/backend_call.h"
#include "api/ops/detail_checks.h"
#include "api/ops/op_numbering.h"
#include "api/ops/op_overlaps.h"
#include "api/ops/op_spec.h"
#include "api/ops/scratch_pool.h"
#include "api/process_group.h"

namespace distcomm {

std::shared_ptr<OpOverlaps> ProcessGroup::make_overlaps() { return std::make_shared<OpOverlaps>(); }

WorkPtr ProcessGroup::issue(const OpSpec& spec, const BackendCall& call) {
  const std::string& where_prefix = checks_->where_prefix();
  // Every op the program calls passes here (the ops that pack a list or split a batch check
  // earlier too, under their own name); the core's own ops carry the group's timeout.
  if (spec.kind != OpKind::kInternal) checks_->timeout(spec.type, spec.timeout);
  const DeviceType device = spec.tensor ? spec.tensor->device().type : spec.device;
  Backend& b = backends_->route(spec.type, device, where_prefix);
  // Refusals come before the op is numbered: a refused op takes no sequence number.
  const ReductionPlan plan =
      spec.reduction ? ReductionPlan::make(where_prefix, spec.type, b, *spec.reduction, *spec.tensor, size())
                     : ReductionPlan{};
  if (aborted_) throw PeerFailure(checks_->where(spec.type) + ": the group was aborted; create a new group");
  if (in_fork_child()) refuse_in_fork_child(checks_->where(spec.type));
  uint64_t ordinal_epoch = 0;  // beside the fingerprint, whose layout is the plugins' (work_marks.h)
  const NumberedOp numbered(*numbering_, spec, &ordinal_epoch);  // its description's buffer reused
  const OpContext& ctx = numbered.ctx();
  // DETAIL's checks wrap the backend's call (detail_checks.h), inside the recording: a
  // Desync they raise is recorded as the op's failure to issue, and dumped.
  auto run = [&]() -> WorkPtr {
    if (WorkPtr refused = refused_since_failure(ctx)) return refused;
    if (detail_ && spec.kind != OpKind::kInternal) {
      return detail_->around(spec, ctx, [&] { return call_backend(call, b, plan, ctx); });
    }
    return call_backend(call, b, plan, ctx);
  };
  WorkPtr work;
  if (recorder_) {
    // Issued now, ended when the backend's Work ends (or failed to issue).
    const uint64_t id = recorder_->queued(ctx.fingerprint);
    try {
      work = run();
    } catch (...) {
      recorder_->failed_to_issue(id, std::current_exception());
      throw;
    }
    recorder_->watch(id, work);
  } else {
    work = run();
  }
  // For the stall watch's reports, read by this Work (the backend's: the one it watches).
  if (ordinal_epoch != 0) note_ordinal_epoch(*work, ordinal_epoch);
  if (spec.divided) work = plan.divided_after(work, *spec.divided);
  // What it writes, for a later list op's packing (op_overlaps.h): a lock and a copy of the
  // Work per op on host tensors.
  if (spec.written && !ScratchOutput::active()) overlaps_->record_output(work, *spec.written);
  return work;
}

void ProcessGroup::CoreFailure::note(const std::exception_ptr& error) {
  if (!error || failed.load(std::memory_order_acquire)) return;
  try {
    std::rethrow_exception(error);
  } catch (const AgreedDesync&) {
    return;  // every rank failed the op together, and the backend keeps the group usable
  } catch (const Timeout&) {
  } catch (const PeerFailure&) {
  } catch (const Desync&) {
  } catch (...) {
    return;  // an op's own mistake (InvalidArgument, ...) leaves the group usable
  }
  std::lock_guard<std::mutex> lock(mu);
  if (failed.load(std::memory_order_relaxed)) return;
  first = error;
  failed.store(true, std::memory_order_release);
}

namespace {

// The words the backends' GroupFailure refuses later ops with (group_failure.cc), so that
// a refusal reads the same whether the core or the backend gave it.
constexpr char kUnusable[] = "the group is unusable since an earlier failure; create a new group. First failure";

// error's message without the refusal a backend already put around it (an op refused by
// its backend's own GroupFailure can be the first the core sees end): the core quotes the
// first failure once.
std::exception_ptr quoted_refusal(const std::exception_ptr& first) {
  const std::string message = message_of(first);
  const size_t at = message.find(kUnusable);
  if (at != std::string::npos) {
    // "<op>: the group is unusable ...: <first failure>": keep the refusal as it is (the
    // first failure is a Timeout, PeerFailure or Desync: CoreFailure::note).
    return with_message(first, message.substr(at));
  }
  return with_context(first, kUnusable);
}

}  // namespace

WorkPtr ProcessGroup::refused_since_failure(const OpContext& ctx) const {
  if (!core_failure_->failed.load(std::memory_order_acquire)) return nullptr;
  std::exception_ptr first;
  {
    std::lock_guard<std::mutex> lock(core_failure_->mu);
    first = core_failure_->first;
  }
  // Ended at once, as the backends' own refusals end (a Work that fails; finish() puts the
  // op's description in front), of the first failure's type, as theirs are.
  auto refused = std::make_shared<Work>(ctx.fingerprint.op, ctx.seq, ctx.description);
  refused->finish(quoted_refusal(first));
  return refused;
}

uint16_t ProcessGroup::backend_name_id(const Backend& b) const {
  for (const auto& [backend, id] : backend_names_) {
    if (backend == &b) return id;
  }
  return Work::intern_backend_name(b.name());
}

WorkPtr ProcessGroup::call_backend(const BackendCall& call, Backend& b, const ReductionPlan& plan,
                                   const OpContext& ctx) {
  WorkPtr work;
  try {
    work = call(b, plan, ctx);
  } catch (...) {
    // What the backend threw before returning a Work, with the op's context and the
    // backend's name; a distcomm error keeps its type. One that says where already (the
    // core's own checks, a backend that quoted the description) is left as it is.
    const std::exception_ptr thrown = std::current_exception();
    const std::string message = message_of(thrown);
    if (message.rfind(checks_->where_prefix(), 0) == 0) throw;
    const std::string where = ctx.description + ": backend '" + b.name() + "'";
    try {
      throw;
    } catch (const std::exception&) {
      std::rethrow_exception(with_context(thrown, where + " threw"));
    } catch (...) {
      throw Error(where + " threw a non-std::exception (distcomm cannot say what it was; a backend must throw "
                          "std::exception, best a distcomm error)");
    }
  }
  if (!work) {
    throw Error(ctx.description + ": backend '" + b.name() +
                "' returned a null Work for the op; a backend returns a Work for every op it accepts, and throws "
                "(or returns a failed Work) for one it refuses");
  }
  // The core's safety net (work.h) and the group's first failure, for every backend: the
  // flight recorder's callback notes it where there is one (create_recorder), a callback
  // of its own where recording is off.
  work->arm_core_deadline(ctx.timeout, backend_name_id(b));
  if (!recorder_) {
    work->on_finish([failure = core_failure_](std::exception_ptr error) {
      if (error) failure->note(error);
    });
  }
  return work;
}

}  // namespace distcomm
