#include "launch/tcp_job_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>

#include "api/errors.h"
#include "api/group/auto_backend.h"
#include "api/group/init_wait.h"
#include "api/group/process_group_options.h"
#include "api/store/server/tcp_store_server.h"
#include "api/store/tcp_store.h"

namespace distcomm {
namespace launch {
namespace {

// The refusal a rank of another shape gets, and what node 0's launcher ends with. The
// server knows the client's world size only: its nodes are taken to be as many as ours.
std::string mismatch_text(const JobStoreRequest& ours, int64_t theirs, const std::string& client) {
  const std::string per_node = ours.nnodes > 0 && theirs % ours.nnodes == 0
                                   ? " (with " + std::to_string(ours.nnodes) + " nodes: " +
                                         std::to_string(theirs / ours.nnodes) + " per node)"
                                   : "";
  return "a rank at " + client + " says the job has " + std::to_string(theirs) + " ranks" + per_node +
         ", node 0's store serves a job of " + std::to_string(ours.world_size) + " (" + std::to_string(ours.nnodes) +
         (ours.nnodes == 1 ? " node" : " nodes") + " x " + std::to_string(ours.nproc_per_node) +
         " per node): give every launcher the same --nproc_per_node and --nnodes (or use --rdzv_endpoint for "
         "nodes of different sizes)";
}

class TCPJobStore : public JobStore {
 public:
  explicit TCPJobStore(const JobStoreRequest& request)
      : host_(request.host), identity_(request.identity), nnodes_(request.nnodes), server_(options(request)) {
    for (int* pipe : {doomed_pipe_, fenced_pipe_}) {
      if (::pipe2(pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        throw std::runtime_error(std::string("cannot make a pipe for the job's store: ") + std::strerror(errno));
      }
    }
    server_.start();
  }
  ~TCPJobStore() override {
    client_.reset();  // not a client the farewell should wait for
    // A doomed job's other ranks may still be in their handshake (a refusal comes after a
    // token's proof): they get their refusal, which says why, rather than a closed
    // connection. At most a second; at once when none is connected.
    if (!doomed().empty()) {
      server_.stop_after_farewell(std::chrono::seconds(1));
    } else if (nnodes_ > 1) {
      // The other machines' ranks may still be ending (their last ops, their groups'
      // teardown) when this machine's have: the store stays until they have left it, at most
      // kOtherMachinesGrace, as torchrun's agents wait for each other at the end (a barrier
      // of 300 s there; shorter here, as Ctrl-C waits for it too).
      const auto began = std::chrono::steady_clock::now();
      server_.stop_after_farewell(kOtherMachinesGrace);
      const auto waited = std::chrono::steady_clock::now() - began;
      if (waited >= std::chrono::seconds(1)) {
        char line[200];
        std::snprintf(line, sizeof(line),
                      "launch: kept the job's store %.1f s after this machine's ranks ended, until the other "
                      "machines' ranks left it (at most %lld s)\n",
                      std::chrono::duration<double>(waited).count(),
                      static_cast<long long>(kOtherMachinesGrace.count() / 1000));
        (void)!::write(2, line, std::strlen(line));
      }
    }
    server_.stop();  // first: its thread may be telling us that the job is doomed
    for (int* pipe : {doomed_pipe_, fenced_pipe_}) {
      ::close(pipe[0]);
      ::close(pipe[1]);
    }
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
      std::lock_guard<std::mutex> lock(mu_);
      if (doomed_.empty()) {
        doomed_ = why;
        const char byte = 1;
        (void)!::write(doomed_pipe_[1], &byte, 1);
      }
      return why;
    };
    // A member its group fenced, whose process is on this host: the launcher kills it if
    // it is one of its ranks. Elsewhere a pid means nothing here.
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

  // A client of this store, as a rank is one, made at the first rank_ended.
  Store& client() {
    if (!client_) {
      TCPStoreOptions o;
      o.host = host_;
      o.port = server_.port();
      o.identity = identity_;
      o.timeout = std::chrono::milliseconds(2000);  // the launcher's loop waits for it
      client_ = std::make_unique<TCPStore>(o);
    }
    return *client_;
  }

  static constexpr std::chrono::milliseconds kOtherMachinesGrace{30000};
  const std::string host_;
  const JobIdentity identity_;
  std::unique_ptr<TCPStore> client_;
  bool client_failed_ = false;
  const int nnodes_;
  mutable std::mutex mu_;
  std::string doomed_;  // the first refusal's text
  int doomed_pipe_[2] = {-1, -1};
  std::vector<local::FencedMember> fenced_;  // not yet taken
  int fenced_pipe_[2] = {-1, -1};
  TCPStoreServer server_;  // stopped (its thread joined) when destroyed
};

}  // namespace

std::unique_ptr<JobStore> serve_tcp_job_store(const JobStoreRequest& request) {
  return std::make_unique<TCPJobStore>(request);
}

}  // namespace launch
}  // namespace distcomm
