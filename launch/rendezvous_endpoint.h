// The rendezvous store of an elastic job: served by the launcher on the endpoint's host
// (the first one there to bind the port), reached by every launcher, itself included, as
// a TCPStore client. It belongs to the job: its run id is "rdzv-<rdzv_id>" and its token
// the job's DISTCOMM_STORE_TOKEN, so a launcher of another job, or with another token, is
// refused at its first request.
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>

#include "api/errors.h"
#include <string>

#include "api/process/job_identity.h"
#include "api/store/store.h"
#include "api/store/server/tcp_store_server.h"
#include "launch/elastic_options.h"

namespace distcomm {
namespace launch {

// Thrown by the endpoint's clients when the store has not answered for --rdzv_timeout_s
// (what() says so, and for how long; every client's request then says the same), or when
// it did not answer a request tried once because the launcher is leaving or asked the
// client to stop (what() says that): a Timeout. A store whose launcher ended (nothing
// listens at the endpoint any more) is a StoreError, and one that answers with a refusal
// (another job's store now serves the endpoint) a StoreRefused, as from the TCPStore.
class StoreSilent : public Timeout {
 public:
  using Timeout::Timeout;
};

// What an elastic launcher's user should check after the rendezvous store's `refusal` (a
// StoreRefused's what()): the store's words are a rank's ("Give each job its own
// MASTER_PORT", "every rank needs rank 0's DISTCOMM_STORE_TOKEN"), but this user set
// --rdzv_endpoint and --rdzv_id. "; ..." to append, or "" for another refusal.
std::string elastic_refusal_advice(const std::string& refusal, const ElasticOptions& options);

class RendezvousEndpoint {
 public:
  // Starts serving when the endpoint's host is an address of this machine and its port is
  // free; otherwise another launcher serves it (or will).
  RendezvousEndpoint(const ElasticOptions& options, const std::string& token);
  ~RendezvousEndpoint();

  bool serving() const { return server_ != nullptr; }
  // A client, once the endpoint accepts connections: tries for options.timeout, asking
  // interrupted() between tries (nullptr when it says yes), and passing say() a line after
  // the first 10 s without an answer and every 30 s then (the default timeout is 600 s: a
  // launcher must not sit silent while its endpoint is down). The lines of its clients
  // about a store that stops answering later go to say() too, and interrupted() ends the
  // returned client's waits (see connect_again()). Throws std::runtime_error naming the
  // endpoint and what was tried, or the store's refusal (another job, a wrong token).
  std::unique_ptr<Store> connect(const std::function<bool()>& interrupted,
                                 const std::function<void(const std::string&)>& say = nullptr);
  // Another client, for a thread, once connect() has succeeded.
  //
  // The clients are patient: a request with no reply (a network cut, a stopped store
  // process) or a connection that breaks while something still listens at the endpoint is
  // tried again on a new connection until the store answers, for --rdzv_timeout_s after the
  // request began; then StoreSilent. The first client to wait 10 s says so once, through
  // connect()'s say(), and once again when the store answers. A store that refuses
  // connections (its launcher ended) fails the request at once; give_up() saying yes (asked
  // between tries), give_up_retrying() having been called, or another client having timed
  // out ends it after one try, with a StoreSilent that says why (no try at all when the
  // last request of any client had no answer).
  std::unique_ptr<Store> connect_again(const std::function<bool()>& give_up = nullptr) const;
  // From now on every client's request is tried once (the launcher is leaving).
  void give_up_retrying();
  // Whether the last request of any client went unanswered.
  bool silent() const;

  struct Outage;

 private:
  std::unique_ptr<Store> client() const;  // a TCPStore client

  const ElasticOptions options_;
  const JobIdentity identity_;
  std::unique_ptr<TCPStoreServer> server_;
  std::shared_ptr<Outage> outage_;
};

}  // namespace launch
}  // namespace distcomm
