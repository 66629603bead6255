#include "launch/tcp_job_store.h"

#include "api/store/server/tcp_store_server.h"

namespace distcomm {
namespace launch {
namespace {

class TCPJobStore : public JobStore {
 public:
  explicit TCPJobStore(const TCPStoreServerOptions& options) : server_(options) { server_.start(); }
  int port() const override { return server_.port(); }

 private:
  TCPStoreServer server_;  // stopped (its thread joined) when destroyed
};

}  // namespace

std::unique_ptr<JobStore> serve_tcp_job_store(const JobStoreRequest& request) {
  TCPStoreServerOptions o;
  o.bind_address = server_bind_address(request.host, request.bind);
  o.port = request.port;
  o.identity = request.identity;
  o.world_size = request.world_size;
  return std::make_unique<TCPJobStore>(o);
}

}  // namespace launch
}  // namespace distcomm
