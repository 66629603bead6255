// The rendezvous store of an elastic job: served by the launcher on the endpoint's host
// (the first one there to bind the port), reached by every launcher, itself included, as
// a TCPStore client. It belongs to the job: its run id is "rdzv-<rdzv_id>" and its token
// the job's DISTCOMM_STORE_TOKEN, so a launcher of another job, or with another token, is
// refused at its first request.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "api/process/job_identity.h"
#include "api/store/store.h"
#include "api/store/server/tcp_store_server.h"
#include "launch/elastic_options.h"

namespace distcomm {
namespace launch {

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
  // launcher must not sit silent while its endpoint is down). Throws std::runtime_error
  // naming the endpoint and what was tried, or the store's refusal (another job, a wrong
  // token).
  std::unique_ptr<Store> connect(const std::function<bool()>& interrupted,
                                 const std::function<void(const std::string&)>& say = nullptr);
  // Another client, for a thread, once connect() has succeeded.
  std::unique_ptr<Store> connect_again() const;

 private:
  const ElasticOptions options_;
  const JobIdentity identity_;
  std::unique_ptr<TCPStoreServer> server_;
};

}  // namespace launch
}  // namespace distcomm
