// The job's failure board (launch/job_failure_board.h) over the core's TCPStore: a
// connection per call to the store node 0's launcher serves, as the ranks reach it. Linked
// with alwayslink (nothing refers to this file by name): loading it sets
// job_failure_board_opener().
#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "api/process/launcher_stop.h"
#include "api/store/store.h"
#include "api/store/tcp_store.h"
#include "launch/job_failure_board.h"

namespace distcomm {
namespace launch {
namespace {

// The connect's and each request's: the launcher's loop waits for it, and a stop waits for
// the marks (its SIGTERM follows them).
constexpr std::chrono::milliseconds kBoardTimeout{1500};

class TcpJobFailureBoard : public JobFailureBoard {
 public:
  explicit TcpJobFailureBoard(JobStoreAddress address) : address_(std::move(address)) {}

  bool publish(const FailureNote& note, const std::vector<std::pair<int, std::string>>& stopping) override {
    if (unreachable_) return false;
    try {
      TCPStore store(options());
      // The marks first: the stop follows this call, and a peer that sees the stopped ranks
      // go must find them.
      for (const auto& [rank, why] : stopping) store.set(launcher_stop_key(rank), why);
      store.set(first_failure_key(note.node_rank), note.encode());
      return true;
    } catch (const std::exception& e) {
      unreachable_ = true;  // one wait for it is enough: each holds the launcher's loop
      why_ = e.what();
      return false;
    }
  }

  std::string unreachable_why() const override { return why_; }

  std::vector<FailureNote> others(int nnodes, int self) override {
    std::vector<FailureNote> notes;
    if (unreachable_ || nnodes <= 1) return notes;
    try {
      TCPStore store(options());
      std::vector<std::string> keys;
      for (int node = 0; node < nnodes; ++node) {
        if (node != self) keys.push_back(first_failure_key(node));
      }
      for (const std::optional<Store::Bytes>& value : read_present(store, keys)) {
        if (!value) continue;
        if (std::optional<FailureNote> n = FailureNote::decode(std::string(value->begin(), value->end()))) {
          notes.push_back(*n);
        }
      }
    } catch (const std::exception&) {
      // Node 0's store is gone (its job ended first): this machine's own failure is named.
    }
    return notes;
  }

 private:
  TCPStoreOptions options() const {
    TCPStoreOptions o;
    o.host = address_.host;
    o.port = address_.port;
    o.identity = address_.identity;
    o.timeout = kBoardTimeout;
    return o;
  }

  const JobStoreAddress address_;
  bool unreachable_ = false;
  std::string why_;
};

const bool kRegistered = [] {
  job_failure_board_opener() = [](const JobStoreAddress& address) -> std::unique_ptr<JobFailureBoard> {
    return std::make_unique<TcpJobFailureBoard>(address);
  };
  return true;
}();

}  // namespace
}  // namespace launch
}  // namespace distcomm
