// What an elastic job needs beyond LaunchOptions: how many machines it may have, where
// their launchers meet (the rendezvous), and how long they wait. Filled from flags by
// tools/launch/main.cc (--nnodes=MIN:MAX, --rdzv_endpoint, --rdzv_id, --rdzv_last_call_s,
// --rdzv_timeout_s, --local_addr).
#pragma once

#include <chrono>
#include <string>
#include <utility>

namespace distcomm {
namespace launch {

// torchrun's default rendezvous port, for an endpoint given without one.
constexpr int kDefaultRendezvousPort = 29400;

struct ElasticOptions {
  int min_nodes = 1;
  int max_nodes = 1;
  // The rendezvous store: the launcher on this host serves it, the others connect.
  std::string endpoint_host;
  int endpoint_port = kDefaultRendezvousPort;
  // The job's name: launchers with another one are refused by the rendezvous store.
  std::string rdzv_id = "none";
  // Once min_nodes machines have joined a round, how long to wait for more (unless every
  // machine of the last round and every waiting one has joined, or max_nodes have).
  std::chrono::milliseconds last_call{std::chrono::seconds(30)};
  // How long a launcher waits to reach the endpoint, and for a round to gather min_nodes.
  std::chrono::milliseconds timeout{std::chrono::seconds(600)};
  // A launcher whose heartbeat (every heartbeat_interval) has not moved for this long is
  // taken for gone.
  std::chrono::milliseconds heartbeat_interval{500};
  std::chrono::milliseconds heartbeat_timeout{std::chrono::seconds(5)};
  // The address other machines reach this one at (MASTER_ADDR when it is node 0). "": the
  // address of the interface that routes to the endpoint.
  std::string local_addr;
};

// "4" -> {4, 4}; "1:3" -> {1, 3}. Throws std::invalid_argument naming --nnodes.
std::pair<int, int> parse_nnodes(const std::string& text);

// "host:port", "host" (port 29400), "[v6::addr]:port" into options. Throws
// std::invalid_argument naming --rdzv_endpoint.
void parse_endpoint(const std::string& text, ElasticOptions* options);

// Throws std::invalid_argument naming the flag: min/max, an endpoint host that does not
// resolve, an rdzv_id with characters other than letters, digits, '_', '-', '.', times.
void validate(const ElasticOptions& options);

// The address this host uses to reach host:port (a UDP socket "connected" there: nothing
// is sent), host's name looked up within `wait`. Throws std::runtime_error.
std::string local_address_towards(const std::string& host, int port, std::chrono::milliseconds wait);

}  // namespace launch
}  // namespace distcomm
