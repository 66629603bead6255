#include "api/store/server/tcp_store_server.h"

#include <atomic>
#include <utility>

#include "api/errors.h"
#include "api/store/internal/socket.h"
#include "api/store/internal/store_handshake.h"
#include "api/store/server/store_server_loop.h"
#include "api/logging.h"
#include "api/process/thread_start.h"

namespace distcomm {

namespace {

// Says once per process that a store without a token serves anyone who can connect.
void warn_unauthenticated(const std::string& where) {
  static std::atomic<bool> warned{false};
  if (warned.exchange(true)) return;
  log_line("warning: the TCP store on " + where + " has no token: any process that can connect to it can read "
           "and change this job's keys. tools/launch and spawn() give each job one; started by hand, give every "
           "rank the same " + std::string(kRunIdVariable) + " and " + kStoreTokenVariable +
           " (docs/security.md)");
}

}  // namespace

TCPStoreLimits resolve_limits(TCPStoreLimits limits, int world_size) {
  if (limits.max_connections <= 0) limits.max_connections = world_size > 0 ? 2 * world_size + 16 : 1024;
  if (limits.max_pending <= 0) limits.max_pending = world_size > 0 ? world_size + 64 : 256;
  if (limits.max_buffered_bytes == 0) {
    throw InvalidArgument("TCPStoreLimits::max_buffered_bytes must be above 0");
  }
  if (limits.handshake_deadline.count() <= 0 || limits.transfer_deadline.count() <= 0) {
    throw InvalidArgument("TCPStoreLimits: the handshake and transfer deadlines must be above 0");
  }
  return limits;
}

std::string server_bind_address(const std::string& host, const std::string& bind) {
  if (bind == "*") return "";
  return bind.empty() ? host : bind;
}

TCPStoreServer::TCPStoreServer(TCPStoreServerOptions options) : options_(std::move(options)) {
  options_.limits = resolve_limits(options_.limits, options_.world_size);
  if (options_.identity.run_id.size() > internal::kMaxRunIdBytes) {
    throw InvalidArgument("TCPStoreServer: the run id is over " + std::to_string(internal::kMaxRunIdBytes) +
                          " bytes");
  }
}

TCPStoreServer::~TCPStoreServer() { stop(); }

void TCPStoreServer::start() {
  if (loop_) throw StoreError("TCPStoreServer: already started on port " + std::to_string(options_.port));
  internal::Socket listener =
      internal::listen_tcp(options_.bind_address, options_.port, options_.bind_address_named_by);
  options_.port = internal::local_port(listener.fd());
  const std::string where = internal::host_port(options_.bind_address, options_.port);
  if (options_.identity.token.empty()) warn_unauthenticated(where);
  const std::string& name = options_.bind_address;
  if (!name.empty() && name != "localhost" && !internal::is_numeric_address(name) &&
      internal::bound_to_loopback(listener.fd())) {
    // Debian maps a host's own name to 127.0.1.1: other hosts could not reach the store.
    log_line("warning: the TCP store listens on " + where + ", and '" + name + "' is a loopback address on this "
             "host: ranks on other hosts cannot reach it. Set MASTER_ADDR to an address they reach, or "
             "DISTCOMM_STORE_BIND=* (docs/security.md)");
  }
  loop_ = std::make_unique<Loop>(std::move(listener), options_, where);
  thread_ = start_thread("the TCP store server on " + where, [this, where] {
    try {
      loop_->run();
    } catch (const std::exception& e) {
      // Clients see their connections close and say so; this says why.
      log_line("TCPStore server on " + where + " stopped: " + e.what());
    } catch (...) {
      // Nothing escapes the thread: its owner (a rank, a launcher) lives on.
      log_line("TCPStore server on " + where + " stopped: unknown exception");
    }
  });
}

void TCPStoreServer::stop() {
  if (!loop_) return;
  loop_->wake();
  if (thread_.joinable()) thread_.join();
  loop_.reset();
}

void TCPStoreServer::stop_after_farewell(std::chrono::milliseconds grace) {
  if (!loop_) return;
  loop_->serve_until_clients_leave(internal::Clock::now() + grace);
  if (thread_.joinable()) thread_.join();  // the loop returns by itself, by the deadline
  loop_.reset();
}

}  // namespace distcomm
