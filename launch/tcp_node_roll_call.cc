// The roll call of a static job's machines (launch/node_roll_call.h) over the core's
// TCPStore: a connection per beat or look to the store node 0's launcher serves (a held one
// would keep that store's farewell waiting). Linked with alwayslink (nothing refers to this
// file by name): loading it sets node_roll_call_opener().
#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/store/store.h"
#include "api/store/tcp_store.h"
#include "launch/duration_text.h"
#include "launch/node_roll_call.h"

namespace distcomm {
namespace launch {
namespace {

using Clock = std::chrono::steady_clock;

// Each connect and request: a beat must not outlast the next one by much.
constexpr std::chrono::milliseconds kRequestTimeout{1000};

// "launch/roll_call/<attempt>/<node>/<what>": an attempt's keys are its own.
std::string key_of(int attempt, int node, const char* what) {
  return "launch/roll_call/" + std::to_string(attempt) + "/" + std::to_string(node) + "/" + what;
}

// Node 0's farewell (NodeRollCall::leave): its words. One store per attempt, so one key.
constexpr char kNode0LeftKey[] = "launch/node0_left";

std::string text_of(const std::optional<Store::Bytes>& b) { return b ? std::string(b->begin(), b->end()) : ""; }

class TcpNodeRollCall : public NodeRollCall {
 public:
  TcpNodeRollCall(JobStoreAddress address, int nnodes, int node_rank, int attempt, std::string who)
      : address_(std::move(address)), nnodes_(nnodes), node_rank_(node_rank), attempt_(attempt), who_(std::move(who)) {
    // Another machine's first beat before its ranks start (node 0's store answers by now:
    // run_job checked the shape there): a machine lost at once is still named by who it was.
    if (node_rank_ != 0) said_who_ = beat_once(said_who_);
    thread_ = std::thread([this] { node_rank_ == 0 ? watch() : beat(); });
  }

  ~TcpNodeRollCall() override { stop(); }

  void ended(const std::string& how) override {
    stop();
    if (node_rank_ == 0 || node0_left()) return;  // node 0's store went as node 0 said it would
    try {
      TCPStore store(options());
      store.set(key_of(attempt_, node_rank_, "ended"), to_bytes(how));
    } catch (const std::exception&) {
      // Node 0's store is gone: its launcher has ended and reads nothing more.
    }
  }

  bool settled() override {
    if (node_rank_ != 0) return true;
    std::lock_guard<std::mutex> lock(mu_);
    return undecided() == 0;
  }

  std::optional<std::pair<int, std::string>> job_stop() override {
    std::lock_guard<std::mutex> lock(mu_);
    return job_stop_;
  }

  bool node0_lost() override {
    std::lock_guard<std::mutex> lock(mu_);
    return node0_lost_;
  }

  bool leave(const std::string& words) override {
    if (node_rank_ != 0) return false;
    try {
      TCPStore store(options());
      store.set(kNode0LeftKey, to_bytes(words));
      return true;
    } catch (const std::exception&) {
      return false;  // its own store, not answering: the others take node 0 for lost, as before
    }
  }

  std::optional<std::string> node0_left() override {
    std::lock_guard<std::mutex> lock(mu_);
    return departed_;
  }

  bool stop_known_by_all() override {
    if (node_rank_ != 0) return true;
    std::lock_guard<std::mutex> lock(mu_);
    for (int node = 1; node < nnodes_; ++node) {
      const Seen& s = seen_[node];
      if (!s.stop_seen && !s.ended && Clock::now() - s.changed < kRollCallSilence) return false;
    }
    return true;
  }

  std::vector<OtherMachine> others() override {
    std::vector<OtherMachine> others;
    if (node_rank_ != 0) return others;
    std::lock_guard<std::mutex> lock(mu_);
    const Clock::time_point now = Clock::now();
    for (int node = 1; node < nnodes_; ++node) {
      const Seen& s = seen_[node];
      OtherMachine m;
      m.node_rank = node;
      m.checked_in = !s.who.empty() || !s.beats.empty();
      m.who = s.who.empty() ? "its launcher never checked in" : s.who;
      m.last_seen = s.changed - began_;
      m.stop_seen = s.stop_seen;
      if (s.ended) {
        m.state = *s.ended == kRanksExitedZero ? OtherMachine::State::kExitedZero : OtherMachine::State::kFailed;
      } else {
        m.state = now - s.changed >= kRollCallSilence ? OtherMachine::State::kLost : OtherMachine::State::kRunning;
      }
      others.push_back(std::move(m));
    }
    return others;
  }

 private:
  struct Seen {
    std::string beats;
    Clock::time_point changed;
    std::optional<std::string> ended;  // what its launcher said of its ranks' end
    std::string who;
    bool stop_seen = false;  // its launcher read the job's stop (job_stop)
  };

  TCPStoreOptions options() const {
    TCPStoreOptions o;
    o.host = address_.host;
    o.port = address_.port;
    o.identity = address_.identity;
    o.timeout = kRequestTimeout;
    return o;
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  // Waits one beat; false once stopping.
  bool pause() {
    std::unique_lock<std::mutex> lock(mu_);
    return !cv_.wait_for(lock, kRollCallBeat, [&] { return stopping_; });
  }

  // Another machine's launcher: who it is once, then a beat each kRollCallBeat, until node
  // 0's store is taken for gone or left as its farewell said (no beat can reach it then).
  void beat() {
    while (pause()) {
      said_who_ = beat_once(said_who_);
      std::lock_guard<std::mutex> lock(mu_);
      if (node0_lost_ || departed_) return;
    }
  }

  // Returns whether who this launcher is has been said. Reads the job's stop too
  // (job_failure_board.h): once read, says so (node 0's launcher waits for that word). A beat
  // that does not reach node 0's store is tried again at the next, but not for ever: once
  // every beat for kRollCallSilence failed, node 0's launcher is taken for gone (lose_node0).
  // Unless a beat read node 0's farewell: the first that fails after it is node 0's leaving.
  bool beat_once(bool said_who) {
    const Clock::time_point began = Clock::now();
    try {
      TCPStore store(options());
      if (!said_who) store.set(key_of(attempt_, node_rank_, "who"), to_bytes(who_));
      said_who = true;
      store.add(key_of(attempt_, node_rank_, "beats"), 1);
      const std::vector<std::optional<Store::Bytes>> read = read_present(store, {job_stop_key(), kNode0LeftKey});
      const std::optional<Store::Bytes>& stop = read[0];
      if (read[1]) farewell_ = text_of(read[1]);
      if (stop) {
        if (const auto decoded = decode_job_stop(text_of(stop))) {
          {
            std::lock_guard<std::mutex> lock(mu_);
            job_stop_ = decoded;
          }
          store.set(key_of(attempt_, node_rank_, "stop_seen"), to_bytes("1"));
        }
      }
      failing_since_ = Clock::time_point();
    } catch (const std::exception& e) {
      // Not reached this time (node 0's store gone, or slow): the next beat tries again,
      // unless the beats have failed for as long as node 0's launcher takes this one for lost.
      if (!farewell_.empty()) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!job_stop_) departed_ = farewell_;  // node 0 said it was leaving: it left
        return said_who;
      }
      if (failing_since_ == Clock::time_point()) failing_since_ = began;
      if (began - failing_since_ >= kRollCallSilence) lose_node0(e.what());
    }
    return said_who;
  }

  // Node 0's store has not answered a beat since failing_since_, kRollCallSilence and more:
  // its launcher ended (a stop this launcher missed while it was itself stopped, a kill, a
  // crash) or its machine or network was lost. Nobody watches this machine's ranks, and the
  // job's store is gone: the ranks are stopped (job_stop, as node 0's own stop would), once,
  // unless node 0's word came first. Node 0's launcher calls this machine lost after as long.
  void lose_node0(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (job_stop_) return;
    node0_lost_ = true;
    job_stop_.emplace(SIGTERM, "node 0's launcher ended or was lost: its store at " + address_.host + ":" +
                                   std::to_string(address_.port) + " has not answered this launcher's beats for " +
                                   tenths_text(Clock::now() - failing_since_) + " (" + why + ")");
  }

  // Node 0's launcher: each kRollCallBeat, every other node's beats, who and end.
  void watch() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int node = 1; node < nnodes_; ++node) seen_[node].changed = began_;
    }
    do {
      std::vector<std::string> keys;
      for (int node = 1; node < nnodes_; ++node) {
        for (const char* what : {"beats", "ended", "who", "stop_seen"}) keys.push_back(key_of(attempt_, node, what));
      }
      std::vector<std::optional<Store::Bytes>> values;
      try {
        TCPStore store(options());
        values = read_present(store, keys);
      } catch (const std::exception&) {
        continue;  // its own store, not answering for once: nothing is learned this time
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (int node = 1; node < nnodes_; ++node) {
          const size_t at = static_cast<size_t>(node - 1) * 4;
          Seen& s = seen_[node];
          // The counter as the store keeps it: only whether it moved matters.
          const std::string beats = text_of(values[at]);
          if (beats != s.beats) {
            s.beats = beats;
            s.changed = Clock::now();
          }
          if (!s.ended && values[at + 1]) s.ended = text_of(values[at + 1]);
          if (values[at + 2]) s.who = text_of(values[at + 2]);
          if (values[at + 3]) s.stop_seen = true;
        }
      }
      cv_.notify_all();
    } while (pause());
  }

  // Nodes neither ended nor silent for kRollCallSilence (under mu_).
  int undecided() {
    int n = 0;
    for (int node = 1; node < nnodes_; ++node) {
      const Seen& s = seen_[node];
      if (!s.ended && Clock::now() - s.changed < kRollCallSilence) ++n;
    }
    return n;
  }

  const JobStoreAddress address_;
  const int nnodes_;
  const int node_rank_;
  const int attempt_;
  const std::string who_;
  const Clock::time_point began_ = Clock::now();
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<int, Seen> seen_;
  bool said_who_ = false;  // the beating thread's, after the constructor's first beat
  // The beating thread's (and the constructor's first beat): when the first of the beats
  // that failed since the last that reached node 0's store began; zero while they reach it.
  Clock::time_point failing_since_;
  std::optional<std::pair<int, std::string>> job_stop_;  // what a beat read (under mu_)
  bool node0_lost_ = false;  // job_stop_ is lose_node0's (under mu_)
  std::string farewell_;     // the beating thread's: node 0's farewell words, once a beat read them
  std::optional<std::string> departed_;  // farewell_, once a beat after it failed (under mu_)
  std::thread thread_;
};

const bool kRegistered = [] {
  node_roll_call_opener() = [](const JobStoreAddress& address, int nnodes, int node_rank, int attempt,
                               const std::string& who) -> std::unique_ptr<NodeRollCall> {
    return std::make_unique<TcpNodeRollCall>(address, nnodes, node_rank, attempt, who);
  };
  return true;
}();

}  // namespace
}  // namespace launch
}  // namespace distcomm
