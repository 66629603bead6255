#include "launch/refusal_reader.h"

#include <unistd.h>

#include <algorithm>
#include <exception>
#include <optional>
#include <utility>

#include "api/store/store.h"
#include "api/store/tcp_store.h"

namespace distcomm {
namespace launch {
namespace {

// Keys per request: far below the protocol's field limit, whatever the number of processes.
constexpr size_t kKeysPerRequest = 1024;

void say(const std::string& line) {
  const std::string text = "launch: " + line + "\n";
  (void)!::write(2, text.data(), text.size());
}

// Another machine's launcher's view of node 0's store: nothing served, refusals read.
class Node0StoreReader : public JobStore {
 public:
  explicit Node0StoreReader(const JobStoreRequest& r) : port_(r.port), reader_(r.host, r.port, r.identity) {}
  int port() const override { return port_; }
  std::string doomed() const override { return ""; }  // node 0's launcher judges the job's shape
  int doomed_fd() const override { return -1; }       // poll() passes over a negative fd
  StoreWord ask(const std::vector<std::string>& member_ids, bool must_ask) override {
    return reader_.ask(member_ids, must_ask);
  }

 private:
  const int port_;
  RefusalReader reader_;
};

}  // namespace

RefusalReader::RefusalReader(std::string host, int port, JobIdentity identity)
    : host_(std::move(host)), port_(port), identity_(std::move(identity)) {}

StoreWord RefusalReader::ask(const std::vector<std::string>& member_ids, bool must_ask) noexcept {
  StoreWord word;
  const auto now = std::chrono::steady_clock::now();
  if (!must_ask && now < quiet_until_) return word;
  try {
    TCPStoreOptions o;
    o.host = host_;
    o.port = port_;
    o.identity = identity_;
    o.timeout = kAskTimeout;  // the connect's and the request's: the launcher's loop waits for it
    TCPStore store(o);
    // The stop's key rides with the first request's marks: no request more for it.
    for (size_t first = 0; first == 0 || first < member_ids.size(); first += kKeysPerRequest) {
      const size_t last = std::min(member_ids.size(), first + kKeysPerRequest);
      std::vector<std::string> keys;
      for (size_t i = first; i < last; ++i) keys.push_back(dead_mark_prefix() + member_ids[i]);
      if (first == 0) keys.push_back(job_stopped_key());
      const std::vector<std::optional<Store::Bytes>> marks = read_present(store, keys);
      for (size_t k = 0; k < keys.size() && k < marks.size(); ++k) {
        if (!marks[k]) continue;  // not gone, or gone without a word yet; not stopped
        if (first == 0 && k + 1 == keys.size()) {
          word.stopped = to_string(*marks[k]);
          if (word.stopped.empty()) word.stopped = "(no reason given)";
        } else if (std::optional<RefusedMember> r = refusal_of(keys[k], to_string(*marks[k]))) {
          word.refused.push_back(*r);
        }
      }
    }
    word.answered = true;
  } catch (const std::exception& e) {
    quiet_until_ = now + kQuietAfterFailure;
    if (!said_) {
      said_ = true;
      say("cannot ask the job's store at " + host_ + ":" + std::to_string(port_) +
          " whether the fault-tolerant job's members refused a process of this launcher, or stopped the job (" +
          e.what() + "): its exit counts as a failure, and it may be replaced; asked again before a replacement "
          "starts and at the end (not said again)");
    }
    word = StoreWord{};
  }
  return word;
}

std::unique_ptr<JobStore> read_node0_store(const JobStoreRequest& request) {
  return std::make_unique<Node0StoreReader>(request);
}

}  // namespace launch
}  // namespace distcomm
