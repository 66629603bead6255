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
  std::vector<RefusedMember> refusals(const std::vector<std::string>& member_ids) override {
    return reader_.refusals(member_ids);
  }

 private:
  const int port_;
  RefusalReader reader_;
};

}  // namespace

RefusalReader::RefusalReader(std::string host, int port, JobIdentity identity)
    : host_(std::move(host)), port_(port), identity_(std::move(identity)) {}

std::vector<RefusedMember> RefusalReader::refusals(const std::vector<std::string>& member_ids) noexcept {
  std::vector<RefusedMember> refused;
  if (member_ids.empty()) return refused;
  const auto now = std::chrono::steady_clock::now();
  if (now < quiet_until_) return refused;
  try {
    TCPStoreOptions o;
    o.host = host_;
    o.port = port_;
    o.identity = identity_;
    o.timeout = kAskTimeout;  // the connect's and the request's: the launcher's loop waits for it
    TCPStore store(o);
    for (size_t first = 0; first < member_ids.size(); first += kKeysPerRequest) {
      const size_t last = std::min(member_ids.size(), first + kKeysPerRequest);
      std::vector<std::string> keys;
      for (size_t i = first; i < last; ++i) keys.push_back(dead_mark_prefix() + member_ids[i]);
      const std::vector<std::optional<Store::Bytes>> marks = read_present(store, keys);
      for (size_t k = 0; k < keys.size() && k < marks.size(); ++k) {
        if (!marks[k]) continue;  // not gone, or gone without a word yet
        if (std::optional<RefusedMember> r = refusal_of(keys[k], to_string(*marks[k]))) refused.push_back(*r);
      }
    }
  } catch (const std::exception& e) {
    quiet_until_ = now + kQuietAfterFailure;
    if (!said_) {
      said_ = true;
      say("cannot ask the job's store at " + host_ + ":" + std::to_string(port_) +
          " whether the fault-tolerant job's members refused a process of this launcher (" + e.what() +
          "): its exit counts as a failure, and it may be replaced (not said again)");
    }
    refused.clear();
  }
  return refused;
}

std::unique_ptr<JobStore> read_node0_store(const JobStoreRequest& request) {
  return std::make_unique<Node0StoreReader>(request);
}

}  // namespace launch
}  // namespace distcomm
