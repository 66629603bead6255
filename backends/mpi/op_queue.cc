#include "backends/mpi/op_queue.h"

#include <algorithm>
#include <string>
#include <utility>

#include "api/errors.h"

namespace distcomm {
namespace mpi {
namespace {

// Who the op waits for, as far as MPI tells: a send's or recv's peer; for a collective
// MPI cannot tell which rank has not joined, and only a store (the stall watch) can.
std::string waited_for(const Op& op, bool store_names_peers) {
  if (op.call == Call::kSend) {
    return "rank " + std::to_string(op.root) + " of the group has not received it (no matching recv of tag " +
           std::to_string(op.tag) + ") or is stuck";
  }
  if (op.call == Call::kRecv && op.root != MPI_ANY_SOURCE) {
    return "rank " + std::to_string(op.root) + " of the group has not sent it (no matching send of tag " +
           std::to_string(op.tag) + ") or is stuck";
  }
  if (store_names_peers) return "a peer has not joined it or is stuck";
  // The advice must be one that gives mpi a store: init_process_group makes one for mpi only
  // from InitOptions::store or an init_method other than the default env:// (api/init.cc),
  // so MASTER_ADDR and MASTER_PORT alone, under mpirun, give none (a user who set them was
  // told to set them, and got this text again).
  return std::string("a peer has not ") + (op.call == Call::kRecv ? "sent it" : "joined it") +
         " or is stuck; MPI cannot tell which, and without a store (a job launched by mpirun alone) the peer "
         "cannot be named; to have it named, " + kStoreAdvice;
}

// The Work's description, put before this, names rank, group, op and sequence number.
std::exception_ptr timeout_error(const Op& op, bool store_names_peers) {
  return std::make_exception_ptr(Timeout(
      "did not finish within " + std::to_string(op.timeout.count()) + " ms: " + waited_for(op, store_names_peers) +
      ". MPI cannot cancel a started operation, so "
      "this group is now unusable: destroy it and create a new one, or exit"));
}

// An op not ended yet: its name, and what tells it apart ("tag 5 from rank 0", "#4").
std::pair<std::string, std::string> pending_op_text(const Op& op) {
  if (op.call == Call::kSend) {
    return {"send", "tag " + std::to_string(op.tag) + " to rank " + std::to_string(op.root)};
  }
  if (op.call == Call::kRecv) {
    return {"recv", "tag " + std::to_string(op.tag) + " from " +
                        (op.root == MPI_ANY_SOURCE ? std::string("any rank") : "rank " + std::to_string(op.root))};
  }
  return {op_type_name(op.work->op()), "#" + std::to_string(op.work->seq())};
}

}  // namespace

OpQueue::OpQueue(MPI_Comm comm, OpCounters& counters, std::function<void(int64_t)> submitted,
                 std::shared_ptr<GroupFailure> failure, std::string where)
    : comm_(comm),
      counters_(counters),
      submitted_(std::move(submitted)),
      failure_(std::move(failure)),
      where_(std::move(where)) {}

std::string OpQueue::pending_ops() {
  take_incoming();
  std::vector<const Op*> ops;
  if (collective_) ops.push_back(collective_.get());
  for (const auto& op : p2p_) ops.push_back(op.get());
  for (const auto& op : waiting_) ops.push_back(op.get());
  if (ops.empty()) return "";
  if (ops.size() == 1) {
    const auto [name, detail] = pending_op_text(*ops[0]);
    return "1 " + name + " (" + detail + ")";
  }
  std::string named;
  for (size_t i = 0; i < ops.size() && i < 3; ++i) {
    const auto [name, detail] = pending_op_text(*ops[i]);
    named += (i ? ", " : "") + name + " " + detail;
  }
  if (ops.size() > 3) named += ", ...";
  return std::to_string(ops.size()) + " ops (" + named + ")";
}

void OpQueue::end(Op& op, std::exception_ptr error) {
  op.work->finish(error);
  op.work->mark_done();
  counters_.ended.fetch_add(1);
  if (!op.work->waiter_drives()) counters_.not_waiter_driven.fetch_sub(1);
  counters_.in_flight.fetch_sub(1);
}

void OpQueue::submit(std::unique_ptr<Op> op) {
  // Counted before it is visible to any round, so that a round never sees it uncounted.
  counters_.in_flight.fetch_add(1);
  if (!op->work->waiter_drives()) counters_.not_waiter_driven.fetch_add(1);
  const int64_t bytes = op->bytes();
  std::exception_ptr refused;
  {
    std::lock_guard<std::mutex> lock(mu_);
    refused = failure_->refusal();
    if (!refused) {
      incoming_.push_back(std::move(op));
      incoming_count_.fetch_add(1, std::memory_order_release);
    }
  }
  if (refused) {
    end(*op, refused);
    return;
  }
  submitted_(bytes);
}

void OpQueue::refuse_new(std::exception_ptr error) { failure_->shut_down(std::move(error)); }

void OpQueue::take_incoming(bool even_if_none_counted) {
  if (!even_if_none_counted && incoming_count_.load(std::memory_order_acquire) == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& op : incoming_) {
    next_expiry_ = std::min(next_expiry_, op->deadline);
    waiting_.push_back(std::move(op));
  }
  incoming_.clear();
  incoming_count_.store(0, std::memory_order_relaxed);
}

bool OpQueue::start_waiting() {
  bool started = false;
  while (!waiting_.empty() && !collective_) {
    std::unique_ptr<Op> op = std::move(waiting_.front());
    waiting_.pop_front();
    if (auto error = start(*op, comm_)) {
      fail_group(std::move(op), error);
      return true;
    }
    started = true;
    if (is_p2p(op->call)) {
      p2p_.push_back(std::move(op));
    } else {
      collective_ = std::move(op);
    }
  }
  return started;
}

OpQueue::State OpQueue::progress(Op::Clock::time_point now) {
  const State state = step(now);
  for (auto& op : ended_) end(*op, op->op_error);
  ended_.clear();
  return state;
}

OpQueue::State OpQueue::step(Op::Clock::time_point now) {
  take_incoming();
  if (waiting_.empty() && !collective_ && p2p_.empty()) return State::kIdle;
  bool progressed = start_waiting();

  if (collective_) {
    bool done = false;
    if (auto error = advance(*collective_, comm_, probed_, &done)) {
      fail_group(std::move(collective_), error);
      return State::kProgressed;
    }
    if (done) {
      ended_.push_back(std::move(collective_));
      progressed = true;
      start_waiting();
    }
  }
  // A recv may match a message only when no earlier recv still waiting for one could take
  // it: the order MPI gives receives posted in that order.
  unmatched_.clear();
  for (size_t i = 0; i < p2p_.size();) {
    Op& op = *p2p_[i];
    bool may_match = true;
    if (unmatched(op)) {
      for (const auto& [source, tag] : unmatched_) {
        const bool same_source = source == op.root || source == MPI_ANY_SOURCE || op.root == MPI_ANY_SOURCE;
        may_match = may_match && !(same_source && tag == op.tag);
      }
    }
    bool done = false;
    auto error = advance(op, comm_, probed_, &done, may_match);
    if (!error && !done) {
      if (unmatched(op)) unmatched_.emplace_back(op.root, op.tag);
      ++i;
      continue;
    }
    std::unique_ptr<Op> ended = std::move(p2p_[i]);
    p2p_.erase(p2p_.begin() + static_cast<std::ptrdiff_t>(i));
    if (error) {
      fail_group(std::move(ended), error);
      return State::kProgressed;
    }
    ended_.push_back(std::move(ended));
    progressed = true;
  }

  if (std::unique_ptr<Op> late = take_expired(now)) {
    auto error = timeout_error(*late, store_names_peers_.load());
    fail_group(std::move(late), error);
    return State::kProgressed;
  }
  if (waiting_.empty() && !collective_ && p2p_.empty()) return State::kProgressed;
  return progressed ? State::kProgressed : State::kWaiting;
}

std::unique_ptr<Op> OpQueue::take_expired(Op::Clock::time_point now) {
  if (!(now > next_expiry_)) return nullptr;  // no deadline has passed yet
  auto expired = [now](const std::unique_ptr<Op>& op) { return now > op->deadline; };
  if (collective_ && expired(collective_)) return std::move(collective_);
  // Ops waiting behind a slow collective count too: their clock runs from when they were
  // issued, as the caller's timeout does.
  auto take_from = [&](auto& list) -> std::unique_ptr<Op> {
    auto it = std::find_if(list.begin(), list.end(), expired);
    if (it == list.end()) return nullptr;
    std::unique_ptr<Op> late = std::move(*it);
    list.erase(it);
    return late;
  };
  if (auto late = take_from(p2p_)) return late;
  if (auto late = take_from(waiting_)) return late;
  // None has passed: look again once the earliest left has.
  next_expiry_ = Op::Clock::time_point::max();
  auto earliest = [&](const auto& list) {
    for (const auto& op : list) next_expiry_ = std::min(next_expiry_, op->deadline);
  };
  if (collective_) next_expiry_ = collective_->deadline;
  earliest(p2p_);
  earliest(waiting_);
  return nullptr;
}

void OpQueue::fail_group(std::unique_ptr<Op> failed, std::exception_ptr error) {
  cancel_receives(*failed);
  end(*failed, failure_->record(error, *failed->work));
  if (mpi_holds(*failed)) abandoned_->add(comm_, std::move(failed));
  fail_all(failure_->refusal());  // quotes the first failure: rank, group, op, seq
}

void OpQueue::fail_all(std::exception_ptr error) {
  refuse_new(error);
  error = failure_->refusal();  // the group's first failure, if it failed before
  // Under the lock, even when the count says none: a submit that read the group as usable
  // just before refuse_new may not have counted its op yet, and the lock is what orders it
  // before this (left in incoming_ by a detached queue, its Work never ended).
  take_incoming(true);
  auto give_up = [&](std::unique_ptr<Op> op) {
    cancel_receives(*op);
    end(*op, error);
    if (mpi_holds(*op)) abandoned_->add(comm_, std::move(op));
  };
  if (collective_) give_up(std::move(collective_));
  for (auto& op : p2p_) give_up(std::move(op));
  p2p_.clear();
  for (auto& op : waiting_) end(*op, error);
  waiting_.clear();
  // No recv will come for them now.
  if (std::unique_ptr<Op> discards = probed_.discard_all()) abandoned_->add(comm_, std::move(discards));
}

void OpQueue::retire_comm() {
  abandoned_->retire(comm_);
  comm_ = MPI_COMM_NULL;
}

}  // namespace mpi
}  // namespace distcomm
