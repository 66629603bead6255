#include "launch/tcp_job_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/errors.h"
#include "api/group/auto_backend.h"
#include "api/group/init_wait.h"
#include "api/group/process_group_options.h"
#include "api/store/server/tcp_store_server.h"
#include "api/store/tcp_store.h"
#include "launch/refusal_reader.h"
#include "launch/tcp_job_failure_board.h"

namespace distcomm {
namespace launch {
namespace {

// Node 0's launcher's one line on how long it kept the job's store for the other machines
// (roll call and farewell together: ~TCPJobStore), when that lasted a second or more:
// "launch: kept the job's store 12.0 s after this machine's ranks ended, until the other
// machines left it (at most 30 s)\n". Their launchers count as the machines being there
// (each holds a connection for its failure board), not only their ranks.
std::string kept_store_line(std::chrono::steady_clock::duration waited, std::chrono::steady_clock::duration bound) {
  if (waited < std::chrono::seconds(1)) return "";
  char line[200];
  std::snprintf(line, sizeof(line),
                "launch: kept the job's store %.1f s after this machine's ranks ended, until the other machines left "
                "it (at most %g s)\n",
                std::chrono::duration<double>(waited).count(),
                std::round(std::chrono::duration<double>(bound).count() * 10) / 10);
  return line;
}

// "2 nodes x 2 ranks per node"
std::string shape_text(int nnodes, int nproc_per_node) {
  return std::to_string(nnodes) + (nnodes == 1 ? " node" : " nodes") + " x " + std::to_string(nproc_per_node) +
         (nproc_per_node == 1 ? " rank" : " ranks") + " per node";
}

// The refusal a rank of another world size gets, and what node 0's launcher ends with. The
// server knows the client's world size only, not how its launcher divided it into nodes:
// it names ours alone.
std::string mismatch_text(const JobStoreRequest& ours, int64_t theirs, const std::string& client) {
  return "a rank at " + client + " says the job has " + std::to_string(theirs) + " ranks, node 0's store serves a job of " +
         std::to_string(ours.world_size) + " (" + shape_text(ours.nnodes, ours.nproc_per_node) +
         "): give every launcher the same --nproc_per_node and --nnodes (or use --rdzv_endpoint for nodes of different "
         "sizes)";
}

// Node 0's launcher writes its shape under kShapeKey ("<nnodes> <nproc_per_node>") as it
// creates the store; every other launcher reads it before it starts its ranks. On a match,
// node k's launcher writes kAgreedPrefix<k> (its launcher value, below): node 0's job no
// longer waits for node k. On a mismatch it writes its own launcher value under
// kShapeRefusedKey, which ends node 0's job -- unless node k has agreed already: then it is
// a stranger (a typo on a third machine), which must not end a running job; it writes under
// kStrangerPrefix<n> (n from 1, counted by kStrangerCount) instead, for node 0 to log. A
// launcher value is "<node_rank> <nnodes> <nproc_per_node> <host>". Only launchers read and
// write these keys.
constexpr char kShapeKey[] = "launch/node0_shape";
constexpr char kShapeRefusedKey[] = "launch/shape_refused";
constexpr char kAgreedPrefix[] = "launch/node_agreed/";
// Why node 0's launcher found that the job cannot run, in the other launchers' words:
// node 0's launcher writes it as it dooms the job, and every other launcher whose ranks
// started (it agreed before the one at fault came) reads it and stops its ranks saying the
// same (VerdictWatch), instead of its ranks ending on a store that went away. Each writes
// kVerdictReadPrefix<k> once it has read it: node 0's store waits for those, briefly.
constexpr char kVerdictKey[] = "launch/job_cannot_run";
constexpr char kVerdictReadPrefix[] = "launch/job_cannot_run_read/";
// How long node 0's doomed store waits for the agreed launchers to read kVerdictKey.
constexpr std::chrono::seconds kVerdictReadWait{5};
// How often node 0's launcher says which machines' launchers it still waits for.
constexpr std::chrono::seconds kWaitingProgress{30};
constexpr char kStrangerCount[] = "launch/strangers";
constexpr char kStrangerPrefix[] = "launch/stranger/";
// How long another launcher waits for kShapeKey once it reached node 0's store: node 0's
// launcher writes it as its store starts, unless it is an older one, or node 0's store is
// its rank 0's (--serve_store=false there), which never do (no check then).
constexpr std::chrono::seconds kShapeKeyWait{2};
// How long another launcher tries to reach node 0's store for the check before it starts
// its ranks unchecked (they wait for the store themselves, saying so, by their own timeout).
constexpr std::chrono::seconds kShapeReachWait{60};
// How long one wait of node 0's shape watch lasts: how soon it sees a refusal to judge, or
// that its store closes.
constexpr std::chrono::milliseconds kWatchSlice{250};

std::string flags_text() { return " (--nnodes, --nproc_per_node): give every launcher the same"; }

std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "?";
  return name;
}

void say(const std::string& line) {
  const std::string text = "launch: " + line + "\n";
  (void)!::write(2, text.data(), text.size());
}

std::string launcher_value(const JobStoreRequest& r) {
  return std::to_string(r.node_rank) + " " + std::to_string(r.nnodes) + " " + std::to_string(r.nproc_per_node) + " " +
         this_host();
}

struct LauncherValue {
  int node_rank = -1, nnodes = 0, nproc_per_node = 0;
  std::string host;
};

bool parse_launcher_value(const std::string& value, LauncherValue* v) {
  std::istringstream in(value);
  return static_cast<bool>(in >> v->node_rank >> v->nnodes >> v->nproc_per_node >> v->host);
}

// Whether node 0's job (of `nnodes` machines) no longer waits for the launcher of `node`:
// that one agreed. A node the job does not have (or -1: a rank, which names no node) stands
// for all of them: a launcher claiming node 2 of a 2-node job may be a misconfigured node 1,
// unless node 1 is in already.
bool node_joined(Store& store, int node, int nnodes) {
  if (node > 0 && node < nnodes) return store.check({kAgreedPrefix + std::to_string(node)});
  for (int k = 1; k < nnodes; ++k) {
    if (!store.check({kAgreedPrefix + std::to_string(k)})) return false;
  }
  return true;
}

std::string joined_text(int node, int nnodes) {
  return node > 0 && node < nnodes ? "node " + std::to_string(node) + "'s launcher has joined it"
                                   : "every node's launcher has joined it";
}

class TCPJobStore : public JobStore {
 public:
  explicit TCPJobStore(const JobStoreRequest& request)
      : host_(connect_host(request)),
        identity_(request.identity),
        nnodes_(request.nnodes),
        nproc_per_node_(request.nproc_per_node),
        server_(options(request)) {
    for (int* pipe : {doomed_pipe_, fenced_pipe_}) {
      if (::pipe2(pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        throw std::runtime_error(std::string("cannot make a pipe for the job's store: ") + std::strerror(errno));
      }
    }
    server_.start();
    refusals_ = std::make_unique<RefusalReader>(host_, server_.port(), identity_);  // the port, known now
    // The other machines' launchers check their shape against ours (check_shape_with_node0).
    if (nnodes_ > 1) shape_watch_ = std::thread([this] { watch_shape(); });
  }
  ~TCPJobStore() override {
    if (shape_watch_.joinable()) {
      // Its waits last a slice; the store stays up for the farewell below whatever happens.
      closing_ = true;
      shape_watch_.join();
    }
    client_.reset();  // not a client the farewell should wait for
    release_failure_boards(server_.port());  // nor the attempt's board, which outlives this store
    // A doomed job's other ranks may still be in their handshake (a refusal comes after a
    // token's proof): they get their refusal, which says why, rather than a closed
    // connection. At most a second; at once when none is connected. A stranger refused
    // while the job ran on did not doom it: the other machines' ranks get their grace.
    if (!server_.running()) {
    } else if (!doomed().empty()) {
      wait_for_verdict_readers();
      server_.stop_after_farewell(std::chrono::seconds(1));
    } else if (nnodes_ > 1) {
      // The other machines' ranks may still be ending (their last ops, their groups'
      // teardown) when this machine's have, and their launchers hold connections too (the
      // failure board's): the store stays until the other machines have left it, as
      // torchrun's agents wait for each other at the end (a barrier of 300 s there; shorter
      // here). One deadline with the roll call's wait before (leave_by, attempt.cc), which
      // may have used it all; kOtherMachinesGrace when none was given.
      const auto now = std::chrono::steady_clock::now();
      const bool told = leave_by_ != std::chrono::steady_clock::time_point();
      const auto deadline = told ? leave_by_ : now + kOtherMachinesGrace;
      const auto since = told ? ranks_ended_ : now;
      if (deadline > now) {
        server_.stop_after_farewell(std::chrono::ceil<std::chrono::milliseconds>(deadline - now));
      }
      if (since != std::chrono::steady_clock::time_point()) {
        const std::string line = kept_store_line(std::chrono::steady_clock::now() - since, deadline - since);
        if (!line.empty()) (void)!::write(2, line.data(), line.size());
      }
    }
    server_.stop();  // first: its thread may be telling us that the job is doomed
    for (int* pipe : {doomed_pipe_, fenced_pipe_}) {
      ::close(pipe[0]);
      ::close(pipe[1]);
    }
  }
  void leave_by(std::chrono::steady_clock::time_point deadline,
                std::chrono::steady_clock::time_point ranks_ended) override {
    leave_by_ = deadline;  // the attempt's thread, which destroys this store later
    ranks_ended_ = ranks_ended;
  }
  int port() const override { return server_.port(); }
  std::string doomed() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return doomed_;
  }
  int doomed_fd() const override { return doomed_pipe_[0]; }
  std::vector<local::FencedMember> take_fenced() override {
    std::lock_guard<std::mutex> lock(mu_);
    char bytes[64];
    while (::read(fenced_pipe_[0], bytes, sizeof(bytes)) > 0) {
    }
    std::vector<local::FencedMember> taken;
    taken.swap(fenced_);
    return taken;
  }
  int fenced_fd() const override { return fenced_pipe_[0]; }
  StoreWord ask(const std::vector<std::string>& member_ids, bool must_ask) override {
    return refusals_->ask(member_ids, must_ask);
  }

  void rank_ended(int rank, const std::string& how) override {
    // One failed attempt to reach the store is enough: each would hold the launcher's loop
    // (its output, its signals) for the client's timeout.
    if (client_failed_) return;
    try {
      Store& store = client();
      const std::string world = group_store_base(ProcessGroupOptions{}.group_name);
      if (store.check({world + "/made_by/" + std::to_string(rank)})) return;  // it came to init
      const PeerFailure gone("rank " + std::to_string(rank) + " ended (" + how +
                             ") before it joined init_process_group's world group: the launcher saw it end");
      store.compare_set(world + "/" + kCreationFailedKey, {},
                        to_bytes(encode_creation_failure(rank, std::make_exception_ptr(gone))));
    } catch (const std::exception& e) {
      // The ranks' own wait still ends at their timeout: say once why they may wait it out.
      client_failed_ = true;
      const std::string line = "launch: cannot tell the other ranks that rank " + std::to_string(rank) +
                               " ended before init (" + e.what() + "); not trying again\n";
      (void)!::write(2, line.data(), line.size());
    }
  }

  void tell(const std::string& key, const std::string& value) override {
    // As rank_ended: one failed attempt is enough (each would hold the launcher's loop).
    if (tell_failed_) return;
    try {
      client().set(key, to_bytes(value));
    } catch (const std::exception& e) {
      // The members then wait for a replacement no longer than their recovery timeout.
      tell_failed_ = true;
      const std::string line = "launch: cannot tell the fault-tolerant job's members of its replacements (" +
                               std::string(e.what()) + "); not trying again\n";
      (void)!::write(2, line.data(), line.size());
    }
  }

 private:
  TCPStoreServerOptions options(const JobStoreRequest& request) {
    TCPStoreServerOptions o;
    o.bind_address = server_bind_address(request.host, request.bind);
    if (!request.bind.empty() && request.bind != "*") o.bind_address_named_by = "DISTCOMM_STORE_BIND";
    o.port = request.port;
    o.identity = request.identity;
    o.world_size = request.world_size;
    o.world_size_mismatch = [this, request](int64_t theirs, const std::string& client) {
      const std::string why = mismatch_text(request, theirs, client);
      judge_later(why);
      return why;
    };
    // A member its group fenced, whose process is on this host: the launcher kills it if
    // it is one of its ranks. Elsewhere a pid means nothing here. Only ft/fenced/: the
    // server copies the value of every key under the prefix for this call, and the rest of
    // ft/ (every generation's keys, the members' state) is none of the launcher's business.
    // Refused joiners are asked for instead (ask(): every machine's launcher must see
    // its own, and only node 0's has this hook).
    o.created_prefix = local::fenced_key_prefix();
    o.on_created = [this, domain = shared_memory_domain()](const std::string&, const std::string& value) {
      const std::optional<local::FencedMember> member = local::FencedMember::decode(value);
      if (!member || member->domain != domain) return;
      std::lock_guard<std::mutex> lock(mu_);
      fenced_.push_back(*member);
      const char byte = 1;
      (void)!::write(fenced_pipe_[1], &byte, 1);
    };
    return o;
  }

  // The job cannot run: the first reason is the one said.
  void doom(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (doomed_.empty()) {
      doomed_ = why;
      const char byte = 1;
      (void)!::write(doomed_pipe_[1], &byte, 1);
    }
  }

  // Where the store listens, as a TCPStore serving it connects its own client: its bind
  // address when one was named, else MASTER_ADDR.
  static std::string connect_host(const JobStoreRequest& request) {
    if (request.bind.empty() || request.bind == "*") return request.host;
    const std::string bound = server_bind_address(request.host, request.bind);
    return bound.empty() ? request.host : bound;
  }

  // A client of this store, as a rank is one.
  TCPStoreOptions client_options() const {
    TCPStoreOptions o;
    o.host = host_;
    o.port = server_.port();
    o.identity = identity_;
    o.timeout = std::chrono::milliseconds(2000);  // the launcher's loop waits for it
    return o;
  }

  // One made at the first rank_ended.
  Store& client() {
    if (!client_) client_ = std::make_unique<TCPStore>(client_options());
    return *client_;
  }

  // A client of another world size was refused (on the server's thread, which cannot ask
  // its own store which nodes joined): the shape watch judges it, else it dooms the job.
  void judge_later(const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (watching_) {
        pending_.push_back(why);
        return;
      }
    }
    doom_or_say(why);
  }

  // A refusal nothing judges any more. While the job runs it dooms the job. Once this
  // machine's ranks have ended (closing_: the store waits for the other machines' ranks to
  // leave), the shape watch has ended -- its own client would hold that farewell open -- so
  // a job that ran is not doomed after the fact, but the refusal is still said, as during
  // the job (before, it was queued for a watch that had ended, and never said).
  void doom_or_say(const std::string& why) {
    if (!closing_) {
      doom(why);
      return;
    }
    say("refused a launcher or rank that is not of this job while its store waits for the other machines' ranks "
        "to leave (" + why + ")");
  }

  // The shape watch ends early (its client failed): what it had to judge dooms the job, as
  // anything refused later will.
  void stop_watching() {
    std::vector<std::string> pending;
    {
      std::lock_guard<std::mutex> lock(mu_);
      watching_ = false;
      pending.swap(pending_);
    }
    for (const std::string& why : pending) doom_or_say(why);
  }

  // The shape watch's thread (nnodes_ > 1): says this launcher's shape under kShapeKey, then
  // until the store closes, in slices: a launcher that node 0 waits for and that was given
  // another shape (kShapeRefusedKey) dooms the job -- this launcher stops its ranks, which
  // would wait for ranks that never come until their timeout (30 minutes by default) -- and
  // a client of another world size does too, unless every node's launcher has joined. A
  // stranger (kStrangerPrefix) is logged, and the job runs on.
  void watch_shape() {
    std::unique_ptr<TCPStore> store;
    try {
      store = std::make_unique<TCPStore>(client_options());
      {
        // Before kShapeKey: no node can agree before a refusal is judged by what agreed.
        std::lock_guard<std::mutex> lock(mu_);
        watching_ = true;
      }
      store->set(kShapeKey, to_bytes(std::to_string(nnodes_) + " " + std::to_string(nproc_per_node_)));
    } catch (const std::exception& e) {
      stop_watching();
      if (closing_) return;
      say(std::string("cannot tell the other machines' launchers this one's --nnodes and --nproc_per_node through "
                      "the job's store (") +
          e.what() + "); they do not check theirs against it");
      return;
    }
    int64_t strangers = 0;
    bool refused = false;
    const auto began = std::chrono::steady_clock::now();
    auto next_progress = began + kWaitingProgress;
    bool everyone_in = false;
    while (!closing_) {
      try {
        if (!everyone_in && std::chrono::steady_clock::now() >= next_progress && doomed().empty()) {
          next_progress += kWaitingProgress;
          everyone_in = say_who_is_missing(*store, began);
        }
        const std::string key = kStrangerPrefix + std::to_string(strangers + 1);
        try {
          store->wait({key}, kWatchSlice);
          ++strangers;
          say_stranger(to_string(store->get(key)));
        } catch (const Timeout&) {
        }
        if (!refused && store->check({kShapeRefusedKey})) {
          refused = true;
          // Judged again here: a stranger that found its node not agreed yet may write only
          // after that node's own launcher agreed and started its ranks.
          const std::string value = to_string(store->get(kShapeRefusedKey));
          LauncherValue v;
          if (parse_launcher_value(value, &v) && node_joined(*store, v.node_rank, nnodes_)) {
            say_stranger(value);
          } else {
            doom(refused_text(value, "this launcher (node 0) runs "));
            tell_verdict(*store, refused_text(value, "node 0's launcher runs "));
          }
        }
        std::vector<std::string> pending;
        {
          std::lock_guard<std::mutex> lock(mu_);
          pending.swap(pending_);
        }
        for (const std::string& why : pending) {
          if (!node_joined(*store, -1, nnodes_)) {
            doom(why);
            tell_verdict(*store, why);
          } else {
            say("refused a launcher or rank that is not of this running job (" + why + "); " +
                joined_text(-1, nnodes_) + " already: the job runs on");
          }
        }
      } catch (const std::exception&) {
        stop_watching();  // the store is closing, or gone
        return;
      }
    }
    stop_watching();  // what comes during the farewell is said at once (judge_later)
  }

  void say_stranger(const std::string& value) {
    LauncherValue v;
    if (!parse_launcher_value(value, &v)) return;
    say("refused a launcher on " + v.host + " given node " + std::to_string(v.node_rank) + " of " +
        shape_text(v.nnodes, v.nproc_per_node) + ": this job runs " + shape_text(nnodes_, nproc_per_node_) + " and " +
        joined_text(v.node_rank, nnodes_) + " already; the job runs on");
  }

  // While some machine's launcher has not checked in (its ranks, and so this machine's,
  // wait): which, every kWaitingProgress -- the launchers said nothing while a late one was
  // awaited. Returns whether every node's launcher is in (nothing said then).
  bool say_who_is_missing(Store& store, std::chrono::steady_clock::time_point began) const {
    std::string missing;
    int in = 1;  // this one, node 0
    for (int k = 1; k < nnodes_; ++k) {
      if (store.check({kAgreedPrefix + std::to_string(k)})) {
        ++in;
      } else {
        missing += (missing.empty() ? "" : ", ") + std::to_string(k);
      }
    }
    if (missing.empty()) return true;
    const auto waited = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - began);
    say("waiting for machines: have " + std::to_string(in) + " of --nnodes=" + std::to_string(nnodes_) + " for " +
        std::to_string(waited.count()) + " s; the launcher of node" + (missing.find(',') == std::string::npos ? " " : "s ") +
        missing + (missing.find(',') == std::string::npos ? " has" : " have") +
        " not checked in (this machine's ranks wait for theirs)");
    return false;
  }

  // The first verdict stands, for the other launchers whose ranks started (VerdictWatch).
  static void tell_verdict(Store& store, const std::string& why) {
    try {
      store.compare_set(kVerdictKey, {}, to_bytes(why));
    } catch (const std::exception&) {
      // Their ranks then end on the closed store, as before.
    }
  }

  // Once doomed: until every launcher that agreed has read the verdict (so that each ends
  // saying why, not with its ranks' lost store), at most kVerdictReadWait. At once when no
  // verdict was written, or no other launcher agreed.
  void wait_for_verdict_readers() {
    if (nnodes_ < 2) return;
    try {
      TCPStore store(client_options());
      if (!store.check({kVerdictKey})) return;
      const auto deadline = std::chrono::steady_clock::now() + kVerdictReadWait;
      for (int k = 1; k < nnodes_; ++k) {
        if (!store.check({kAgreedPrefix + std::to_string(k)})) continue;
        while (!store.check({kVerdictReadPrefix + std::to_string(k)}) && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      }
    } catch (const std::exception&) {
      // Nobody can read it any more.
    }
  }

  // What a launcher says of the launcher that wrote `value` under kShapeRefusedKey: `ours`
  // is how node 0's shape is introduced ("this launcher (node 0) runs ", on node 0).
  std::string refused_text(const std::string& value, const std::string& node0) const {
    LauncherValue v;
    const std::string ours = node0 + shape_text(nnodes_, nproc_per_node_);
    if (!parse_launcher_value(value, &v)) {
      return ours + ", another machine's launcher was given another" + flags_text();
    }
    return ours + ", node " + std::to_string(v.node_rank) + "'s launcher (on " + v.host + ") was given " +
           shape_text(v.nnodes, v.nproc_per_node) + flags_text();
  }

  static constexpr std::chrono::milliseconds kOtherMachinesGrace{30000};
  std::chrono::steady_clock::time_point leave_by_{};     // leave_by's; none: kOtherMachinesGrace
  std::chrono::steady_clock::time_point ranks_ended_{};
  const std::string host_;  // where this launcher's own clients connect
  const JobIdentity identity_;
  std::unique_ptr<TCPStore> client_;
  bool client_failed_ = false;
  bool tell_failed_ = false;  // tell()'s own: a rank_ended failure is not one of its
  const int nnodes_;
  const int nproc_per_node_;
  std::thread shape_watch_;  // with nnodes_ > 1: watch_shape()
  std::atomic<bool> closing_{false};
  mutable std::mutex mu_;
  bool watching_ = false;             // the shape watch judges refusals (pending_)
  std::vector<std::string> pending_;  // refusals of clients of another world size, to judge
  std::string doomed_;  // the first refusal's text
  int doomed_pipe_[2] = {-1, -1};
  std::vector<local::FencedMember> fenced_;  // not yet taken
  int fenced_pipe_[2] = {-1, -1};
  TCPStoreServer server_;  // stopped (its thread joined) when destroyed
  std::unique_ptr<RefusalReader> refusals_;  // asks server_ as any launcher asks node 0's store
};

}  // namespace

namespace {

// The JobStore of another machine's launcher's attempt: node 0's store's reader
// (refusal_reader.h), plus a thread that waits there for node 0's verdict (kVerdictKey) and
// makes it this launcher's doomed(): its ranks, started before the launcher at fault came,
// are stopped and the launcher ends with "the job cannot run: ..." as node 0's does. Only
// when node 0's store is a launcher's (it has kShapeKey); its waits last kWatchSlice.
class VerdictWatch : public JobStore {
 public:
  VerdictWatch(std::unique_ptr<JobStore> reader, const JobStoreRequest& request)
      : reader_(std::move(reader)), request_(request) {
    if (::pipe2(doomed_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
      throw std::runtime_error(std::string("cannot make a pipe for the job's store: ") + std::strerror(errno));
    }
    watch_ = std::thread([this] { watch(); });
  }
  ~VerdictWatch() override {
    closing_ = true;
    watch_.join();
    ::close(doomed_pipe_[0]);
    ::close(doomed_pipe_[1]);
  }
  int port() const override { return reader_->port(); }
  std::string doomed() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return doomed_;
  }
  int doomed_fd() const override { return doomed_pipe_[0]; }
  std::vector<local::FencedMember> take_fenced() override { return reader_->take_fenced(); }
  int fenced_fd() const override { return reader_->fenced_fd(); }
  StoreWord ask(const std::vector<std::string>& member_ids, bool must_ask) override {
    return reader_->ask(member_ids, must_ask);
  }
  void rank_ended(int rank, const std::string& how) override { reader_->rank_ended(rank, how); }
  void tell(const std::string& key, const std::string& value) override { reader_->tell(key, value); }

 private:
  void watch() {
    try {
      TCPStoreOptions o;
      o.host = request_.host;
      o.port = request_.port;
      o.identity = request_.identity;
      o.timeout = std::chrono::milliseconds(2000);
      TCPStore store(o);
      if (!store.check({kShapeKey})) return;  // not a launcher's store: no verdict will come
      while (!closing_) {
        try {
          store.wait({kVerdictKey}, kWatchSlice);
        } catch (const Timeout&) {
          continue;
        }
        const std::string why = to_string(store.get(kVerdictKey));
        {
          std::lock_guard<std::mutex> lock(mu_);
          doomed_ = why;
          const char byte = 1;
          (void)!::write(doomed_pipe_[1], &byte, 1);
        }
        store.set(kVerdictReadPrefix + std::to_string(request_.node_rank), to_bytes("read"));
        return;
      }
    } catch (const std::exception&) {
      // Node 0's store is gone or unreachable: this machine's ranks see that themselves.
    }
  }

  std::unique_ptr<JobStore> reader_;
  const JobStoreRequest request_;
  std::thread watch_;
  std::atomic<bool> closing_{false};
  mutable std::mutex mu_;
  std::string doomed_;
  int doomed_pipe_[2] = {-1, -1};
};

// Says that the shape was not checked, and why: the ranks start as they did before the
// check (a check that cannot be made must not keep a job from running).
void say_unchecked(const std::string& why) {
  say("this launcher's --nnodes and --nproc_per_node are not checked against node 0's (" + why +
      "); starting the ranks");
}

// Another machine's launcher, before it starts its ranks: its shape against node 0's. A
// store it cannot reach in kShapeReachWait, or one that is not a distcomm launcher's (node
// 0 with --serve_store=false: its rank 0's, perhaps torch's), leaves the ranks to start
// unchecked. A store that refuses it (another run id, a wrong DISTCOMM_STORE_TOKEN) would
// refuse every rank the same way: none starts.
void check_shape_with_node0(const JobStoreRequest& request) {
  TCPStoreOptions o;
  o.host = request.host;
  o.port = request.port;
  o.identity = request.identity;
  o.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(kShapeReachWait);
  const std::string where = request.host + ":" + std::to_string(request.port);
  std::unique_ptr<TCPStore> store;
  try {
    store = std::make_unique<TCPStore>(o);
  } catch (const StoreRefused& e) {
    throw std::runtime_error("node 0's store at " + where + " refused this launcher, which starts no rank: " +
                             e.what());
  } catch (const std::exception& e) {
    say_unchecked("node 0's store at " + where + " was not reached: " + std::string(e.what()));
    return;
  }
  std::string theirs;
  try {
    store->wait({kShapeKey}, kShapeKeyWait);
    theirs = to_string(store->get(kShapeKey));
  } catch (const std::exception&) {
    return;  // node 0's store says no shape: an older launcher's, or its rank 0's
  }
  std::istringstream in(theirs);
  int nnodes = 0, nproc_per_node = 0;
  if (!(in >> nnodes >> nproc_per_node)) return;  // not ours to judge
  if (nnodes == request.nnodes && nproc_per_node == request.nproc_per_node) {
    try {
      store->set(kAgreedPrefix + std::to_string(request.node_rank), to_bytes(launcher_value(request)));
    } catch (const std::exception&) {
      // Node 0's job then takes a later stranger for this node for a misconfigured one.
    }
    return;
  }
  // Node 0's job already runs with this node: this launcher is a stranger, which must not
  // end it (node 0 only logs it).
  bool running = false;
  try {
    running = node_joined(*store, request.node_rank, nnodes);
    if (running) {
      const int64_t n = store->add(kStrangerCount, 1);
      store->set(kStrangerPrefix + std::to_string(n), to_bytes(launcher_value(request)));
    }
  } catch (const std::exception&) {
    // Told or not, this launcher ends saying why, and leaves the running job alone.
  }
  if (running) {
    throw std::runtime_error("node 0's job is already running with " + shape_text(nnodes, nproc_per_node) + " (" +
                             joined_text(request.node_rank, nnodes) + "), this launcher (node " +
                             std::to_string(request.node_rank) + ") was given " +
                             shape_text(request.nnodes, request.nproc_per_node) +
                             ": it starts no rank, and that job runs on");
  }
  try {
    // Node 0's launcher waits for this node: it ends at once too, saying the same, instead
    // of its ranks waiting for ours until their timeout. The first one to say so is named.
    store->compare_set(kShapeRefusedKey, {}, to_bytes(launcher_value(request)));
  } catch (const std::exception&) {
    // This launcher still ends saying why; node 0's ranks wait out their timeout.
  }
  throw std::runtime_error("node 0's launcher runs " + shape_text(nnodes, nproc_per_node) + ", this one (node " +
                           std::to_string(request.node_rank) + ") was given " +
                           shape_text(request.nnodes, request.nproc_per_node) + flags_text());
}

}  // namespace

std::unique_ptr<JobStore> serve_tcp_job_store(const JobStoreRequest& request) {
  if (request.node_rank != 0 && request.reader_only) {
    return std::make_unique<VerdictWatch>(read_node0_store(request), request);
  }
  if (request.node_rank != 0) {
    check_shape_with_node0(request);
    return nullptr;
  }
  return std::make_unique<TCPJobStore>(request);
}

}  // namespace launch
}  // namespace distcomm
