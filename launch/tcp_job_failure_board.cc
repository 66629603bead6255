// The job's failure board (launch/job_failure_board.h) over the core's TCPStore, served by
// node 0's launcher as the ranks reach it. One connection per board, made as the board is
// (beside the ranks' start, not holding it) and kept until the job's store goes
// (release_failure_boards, tcp_job_failure_board.h): a failure's marks then cost their
// requests only, before the launcher's SIGTERMs. A connection that fails is made again once,
// within the call's bound. Linked with alwayslink (nothing refers to this file by name):
// loading it sets job_failure_board_opener().
#include "launch/tcp_job_failure_board.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/process/launcher_stop.h"
#include "api/store/store.h"
#include "api/store/tcp_store.h"
#include "launch/job_failure_board.h"

namespace distcomm {
namespace launch {
namespace {

using Clock = std::chrono::steady_clock;

// The bound of one call, its reconnect included: the launcher's loop waits for it, and a
// stop waits for the marks (its SIGTERM follows them).
constexpr std::chrono::milliseconds kBoardTimeout{1500};
// Less than this left of a call's bound: no reconnect (its handshake would not fit).
constexpr std::chrono::milliseconds kLeastReconnectTime{100};
// After a call that reached nothing, the calls of this long fail at once: each would hold
// the launcher's loop for kBoardTimeout again (the end's publish and read come together).
constexpr std::chrono::seconds kQuietAfterFailure{10};

class TcpJobFailureBoard;

std::mutex& boards_mu() {
  static std::mutex mu;
  return mu;
}

// This process's boards, for release_failure_boards (under boards_mu()).
std::vector<TcpJobFailureBoard*>& boards() {
  static std::vector<TcpJobFailureBoard*> all;
  return all;
}

class TcpJobFailureBoard : public JobFailureBoard {
 public:
  explicit TcpJobFailureBoard(JobStoreAddress address) : address_(std::move(address)) {
    // Before any rank can fail. On a thread of its own: at a restart node 0's store may come
    // up after this machine's attempt begins, and its ranks must not wait for it here.
    connector_ = std::thread([this] { connect_ahead(); });
    std::lock_guard<std::mutex> lock(boards_mu());
    boards().push_back(this);
  }

  ~TcpJobFailureBoard() override {
    {
      std::lock_guard<std::mutex> lock(boards_mu());
      boards().erase(std::remove(boards().begin(), boards().end(), this), boards().end());
    }
    if (connector_.joinable()) connector_.join();  // bounded by its connect's timeout
  }

  bool publish(const FailureNote& note, const std::vector<std::pair<int, std::string>>& stopping) override {
    return call([&](TCPStore& store, Clock::time_point deadline) {
      // The marks first, each answered (so stored) before this returns: the launcher's
      // SIGTERMs follow this call, and a peer that sees the stopped ranks go must find them.
      for (const auto& [rank, why] : stopping) {
        within(store, deadline);
        store.set(launcher_stop_key(rank), why);
      }
      within(store, deadline);
      store.set(first_failure_key(note.node_rank), note.encode());
    });
  }

  bool publish_job_stop(const FailureNote& note, int sig) override {
    return call([&](TCPStore& store, Clock::time_point deadline) {
      within(store, deadline);
      store.set(first_failure_key(note.node_rank), note.encode());
      within(store, deadline);
      store.set(job_stop_key(), encode_job_stop(sig, note.text));  // last: what the others act on
    });
  }

  std::string unreachable_why() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return why_;
  }

  std::vector<FailureNote> others(int nnodes, int self) override {
    std::vector<FailureNote> notes;
    if (nnodes <= 1) return notes;
    std::vector<std::string> keys;
    for (int node = 0; node < nnodes; ++node) {
      if (node != self) keys.push_back(first_failure_key(node));
    }
    // Not reached (node 0's store is gone: its job ended first): this machine's own failure
    // is named.
    call([&](TCPStore& store, Clock::time_point deadline) {
      notes.clear();  // a retried read starts again
      within(store, deadline);
      for (const std::optional<Store::Bytes>& value : read_present(store, keys)) {
        if (!value) continue;
        if (std::optional<FailureNote> n = FailureNote::decode(std::string(value->begin(), value->end()))) {
          notes.push_back(*n);
        }
      }
    });
    return notes;
  }

  // release_failure_boards.
  void release_if(int port) {
    if (address_.port != port) return;
    std::lock_guard<std::mutex> lock(mu_);
    take_ahead_locked();
    store_.reset();
    released_ = true;
  }

 private:
  TCPStoreOptions options(std::chrono::milliseconds timeout) const {
    TCPStoreOptions o;
    o.host = address_.host;
    o.port = address_.port;
    o.identity = address_.identity;
    o.timeout = timeout;  // the connect's, and each request's on this connection
    return o;
  }

  // On connector_: no lock (call() and release_if() join it before they read ahead_).
  void connect_ahead() {
    try {
      ahead_ = std::make_unique<TCPStore>(options(kBoardTimeout));
    } catch (const std::exception& e) {
      ahead_why_ = e.what();  // the first call connects again, when its bound leaves time
    }
  }

  void take_ahead_locked() {
    if (connector_.joinable()) connector_.join();
    if (!store_ && ahead_) store_ = std::move(ahead_);
    ahead_.reset();
    if (!ahead_why_.empty()) why_ = std::move(ahead_why_);
    ahead_why_.clear();
  }

  // Before each request of a call: its timeout is what is left of the call's bound, so that
  // a publish of several marks to a stalled server still ends within kBoardTimeout.
  static void within(TCPStore& store, Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) throw std::runtime_error("no time left of the board's bound of 1.5 s");
    store.set_timeout(left);
  }

  // Runs `request` on the kept connection; when that fails (the server closed it, a
  // request timed out), once more on a new one, all within kBoardTimeout: `request` calls
  // within() before each of its requests. Never throws.
  bool call(const std::function<void(TCPStore&, Clock::time_point)>& request) {
    std::lock_guard<std::mutex> lock(mu_);
    const Clock::time_point now = Clock::now();
    if (now < quiet_until_) return false;  // why_ is the failure's
    const Clock::time_point deadline = now + kBoardTimeout;  // the connect ahead's wait included
    take_ahead_locked();
    if (released_) {
      why_ = "the job's store was ending";
      return false;
    }
    for (int attempt = 0; attempt < 2; ++attempt) {
      try {
        if (!store_) {
          const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
          if (left < kLeastReconnectTime) break;
          store_ = std::make_unique<TCPStore>(options(left));
        }
        request(*store_, deadline);
        return true;
      } catch (const std::exception& e) {
        store_.reset();
        why_ = e.what();
      }
    }
    quiet_until_ = Clock::now() + kQuietAfterFailure;
    return false;
  }

  const JobStoreAddress address_;
  std::thread connector_;
  std::unique_ptr<TCPStore> ahead_;  // connector_'s, taken by the first call
  std::string ahead_why_;            // why connector_ did not connect
  mutable std::mutex mu_;            // one call at a time on the connection
  std::unique_ptr<TCPStore> store_;  // the kept connection (under mu_)
  bool released_ = false;
  Clock::time_point quiet_until_{};
  std::string why_;
};

const bool kRegistered = [] {
  job_failure_board_opener() = [](const JobStoreAddress& address) -> std::unique_ptr<JobFailureBoard> {
    return std::make_unique<TcpJobFailureBoard>(address);
  };
  return true;
}();

}  // namespace

void release_failure_boards(int port) {
  std::lock_guard<std::mutex> lock(boards_mu());
  for (TcpJobFailureBoard* board : boards()) board->release_if(port);
}

}  // namespace launch
}  // namespace distcomm
