#include "api/work.h"

#include "api/cuda_stream.h"
#include "api/errors.h"
#include "api/logging.h"

namespace distcomm {

const char* op_type_name(OpType op) {
  switch (op) {
    case OpType::kAllReduce: return "all_reduce";
    case OpType::kAllReduceCoalesced: return "all_reduce_coalesced";
    case OpType::kBroadcast: return "broadcast";
    case OpType::kReduce: return "reduce";
    case OpType::kAllGather: return "all_gather";
    case OpType::kGather: return "gather";
    case OpType::kScatter: return "scatter";
    case OpType::kReduceScatter: return "reduce_scatter";
    case OpType::kAllToAll: return "all_to_all";
    case OpType::kBarrier: return "barrier";
    case OpType::kSend: return "send";
    case OpType::kRecv: return "recv";
    case OpType::kRecvAnySource: return "recv_any_source";
    case OpType::kBatchP2P: return "batch_isend_irecv";
  }
  return "?";
}

Work::Work(OpType op, uint64_t seq, std::string description)
    : op_(op), seq_(seq), description_(std::move(description)), start_(Clock::now()) {}

Work::~Work() = default;

void Work::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (is_use_default(timeout)) {
    cv_.wait(lock, [&] { return completed_; });
  } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
    throw Timeout((description_.empty() ? std::string(op_type_name(op_)) : description_) +
                  ": not finished after " + std::to_string(timeout.count()) +
                  " ms of waiting (Work::wait timeout); the op is still running");
  }
  if (error_) std::rethrow_exception(error_);
}

void Work::wait(CUstream_st* stream) {
  CudaStreamGuard on(stream);
  wait();
}

bool Work::is_completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_;
}

bool Work::is_success() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ && !error_;
}

std::exception_ptr Work::exception() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

std::chrono::nanoseconds Work::duration() const {
  std::lock_guard<std::mutex> lock(mu_);
  return (completed_ ? end_ : Clock::now()) - start_;
}

int Work::source_rank() const {
  std::lock_guard<std::mutex> lock(mu_);
  return source_rank_;
}

void Work::set_source_rank(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  source_rank_ = rank;
}

void Work::finish(std::exception_ptr error) {
  std::vector<std::function<void(std::exception_ptr)>> callbacks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finishing_) return;
    finishing_ = true;
    error_ = with_context(error, description_);
    error = error_;
    callbacks.swap(callbacks_);
  }
  // Callbacks first (outside the lock: they may touch this Work), then wake the waiters,
  // so a wait() that returns sees everything the callbacks did. One that throws (a program's
  // handler that rethrows the op's error) must not stop the others, leave the Work
  // unfinished (its waiters would wait for ever) or escape into the thread that finishes
  // it (a backend's own: that would end the process): it is said, then dropped.
  for (auto& cb : callbacks) {
    try {
      cb(error);
    } catch (...) {
      log_line("distcomm: " + description_ + ": a Work callback (on_finish) threw, which nothing can catch on the "
               "thread that ends the op; dropped: " + message_of(std::current_exception()) +
               " (chain a step that may fail with then(), whose Work carries its error)");
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    end_ = Clock::now();
    completed_ = true;
  }
  cv_.notify_all();
}

void Work::on_finish(std::function<void(std::exception_ptr)> cb) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!finishing_) {
    callbacks_.push_back(std::move(cb));  // finish() will run it
    return;
  }
  auto err = error_;  // finish() has begun: the outcome is known, run it here
  lock.unlock();
  cb(err);
}

namespace {

// then()'s Work. Waiting for it waits for `first` before, so that a backend whose waiters
// run their own op (gloo) or drive its progress (mpi) does so for this Work's waiter too.
class ChainedWork : public Work {
 public:
  ChainedWork(WorkPtr first, OpType op) : Work(op, first->seq(), first->description()), first_(std::move(first)) {}

  void wait(std::chrono::milliseconds timeout = kUseDefault) override {
    if (!Work::is_completed()) {
      if (is_use_default(timeout)) {
        try {
          first_->wait();
        } catch (...) {
          // first's error reaches this Work through the callback; Work::wait rethrows it
        }
      } else {
        first_->is_completed();  // a poll: lets the backend start the op now
      }
    }
    Work::wait(timeout);
  }

  bool is_completed() const override {
    if (Work::is_completed()) return true;
    first_->is_completed();
    return Work::is_completed();
  }

 private:
  const WorkPtr first_;
};

}  // namespace

WorkPtr then(const WorkPtr& first, std::function<void()> next, std::optional<OpType> as) {
  auto chained = std::make_shared<ChainedWork>(first, as.value_or(first->op()));
  // Runs while `first` finishes, so the raw pointer is valid (and holding it would be a cycle).
  Work* source = first.get();
  first->on_finish([chained, source, next = std::move(next)](std::exception_ptr error) {
    chained->set_source_rank(source->source_rank());  // a recv from any rank keeps its source
    if (!error) {
      try {
        next();
      } catch (...) {
        error = std::current_exception();
      }
    }
    chained->finish(error);
  });
  return chained;
}

WorkPtr all_of(const std::vector<WorkPtr>& parts, OpType op, uint64_t seq, const std::string& description) {
  auto outer = std::make_shared<Work>(op, seq, description);
  struct State {
    std::mutex mu;
    size_t left;
    std::vector<std::exception_ptr> errors;
  };
  auto state = std::make_shared<State>();
  state->left = parts.size();
  state->errors.resize(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    parts[i]->on_finish([outer, state, i](std::exception_ptr error) {
      std::exception_ptr first;
      {
        std::lock_guard<std::mutex> lock(state->mu);
        state->errors[i] = error;
        if (--state->left > 0) return;
        for (const auto& e : state->errors) {
          if (e) {
            first = e;
            break;
          }
        }
      }
      outer->finish(first);
    });
  }
  return outer;
}

}  // namespace distcomm
