// TCPStore: a Store served over TCP by one TCPStoreServer, for ranks on many hosts.
//
//   TCPStoreOptions o;
//   o.host = "10.0.0.1"; o.port = 29500; o.is_server = (rank == 0);
//   auto store = std::make_shared<TCPStore>(o);
//
// With is_server the store also runs the server (tcp_store_server.h), in its own thread
// of this process, listening on host's address (or bind_address); port 0 picks a free
// port, which port() returns for the caller to publish.
//
// Every connection starts with a handshake: the client names identity.run_id and, when
// the server has a token, both prove they know identity.token (see
// internal/store_handshake.h). A store of another job, or a wrong token, is a StoreError
// at once: "the store at HOST:PORT belongs to another job (run id ...)", "... wrong store
// token".
//
// A server store destroyed after this process published a failure (or while an exception
// unwinds the stack) serves on until the other clients have left, at most a second, so
// that they can still read why (internal/store_host.h).
//
// Keys are limited to 64 KiB and a request (so a value) to what the server takes (64 MiB
// by default, TCPStoreLimits::max_buffered_bytes): larger ones throw InvalidArgument. A
// wait() carries its timeout to the server, which ends it (WAIT_FOR), so one that times out
// keeps its connection; a get() that times out closes it, and the next request opens a
// new one.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "api/process/job_identity.h"
#include "api/store/store.h"
#include "api/store/server/tcp_store_server.h"

namespace distcomm {

namespace internal {
enum class IoStatus;
}

struct TCPStoreOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  bool is_server = false;
  // The job this store belongs to. Every client must have the server's run id and token.
  // An empty token: no authentication (the server warns once).
  JobIdentity identity;
  // For the server: "" listens on host's address (the interface that reaches it), "*" on
  // every interface, anything else on that address (and host() becomes it).
  std::string bind_address;
  // For the server; num_workers is the world size its default connection caps scale with.
  TCPStoreLimits limits;
  // When > 0, each store counts itself in on the server (the key "init/", which
  // num_keys() then includes), and a server store with wait_for_workers returns from its
  // constructor only once that many stores have. A client names it in its handshake, and
  // a server that knows another world size refuses it (StoreError, at once).
  int num_workers = -1;
  // For connecting (retried until then, since the server may start later) and for get()
  // and wait().
  std::chrono::milliseconds timeout = Store::kDefaultTimeout;
  bool wait_for_workers = false;
};

// Thread-safe: requests from several threads are sent one at a time; a call waits for
// the connection no longer than its own timeout.
class TCPStore : public Store {
 public:
  explicit TCPStore(TCPStoreOptions options);
  ~TCPStore() override;

  using Store::set;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            std::chrono::milliseconds timeout = kUseDefault) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;

  // Each key's value, or nullopt where it does not exist, in one request; never waits.
  // Use read_present(store, keys) (store.h), which takes any store.
  std::vector<std::optional<Bytes>> get_present(const std::vector<std::string>& keys);

  // Ends this client's use of the store for good: a request under way on another thread
  // fails at once (its socket is shut down), and every later call throws StoreError(why)
  // without asking the server. For a caller that knows the server is out of its reach (an ft
  // member none of whose heartbeats reached the store for the heartbeat timeout): what it
  // still asks on its way out -- failure records, goodbyes, a commit under way -- would
  // otherwise wait each its own bound (seconds; a commit's, the op timeout) for a server that
  // cannot answer. Thread-safe; the first why holds.
  void cut_off(const std::string& why);

  const std::string& host() const { return options_.host; }
  // The server's port: the one it picked when the options asked for port 0.
  int port() const { return options_.port; }

 private:
  struct Request;
  Bytes call(const Request& r);
  // ", what was left before the deadline of <scope>" when scoped (call_deadline.h), else "".
  static std::string scope_suffix(bool scoped);
  Bytes call_locked(const Request& r);
  // Throws the error for a request whose send or receive ended with status s.
  [[noreturn]] void fail_locked(const Request& r, internal::IoStatus s);
  void connect_locked(std::chrono::milliseconds timeout);
  void disconnect_locked();
  // cut_off's why ("" while it has not been called).
  std::string cut_off_why() const;
  // Which of keys are missing, asked after a request that waited for them timed out;
  // nullopt when the server does not answer that either.
  std::optional<std::vector<std::string>> missing_after_timeout(const std::vector<std::string>& keys);
  void count_in_worker();

  TCPStoreOptions options_;
  std::unique_ptr<TCPStoreServer> server_;
  std::timed_mutex mu_;  // one request at a time on the connection
  // Written under mu_ and cut_mu_ both, so that cut_off, which cannot wait for mu_ (a
  // request holds it), reads it under cut_mu_ and never shuts down a reused descriptor.
  int fd_ = -1;
  mutable std::mutex cut_mu_;
  std::string cut_off_;  // under cut_mu_
  // The server closed a connection it had served (its process exited, or it was destroyed):
  // a reconnect then gets one short try, and when that fails, `gone_` says why, and every
  // later call throws it at once instead of trying again.
  bool closed_by_server_ = false;
  std::string gone_;
  // The largest request the server takes, from the handshake.
  uint64_t max_request_bytes_ = 0;
  // The failures this process had noted for its peers when the store was made: a server
  // destroyed after more serves a farewell.
  uint64_t failures_at_start_ = 0;
};

}  // namespace distcomm
