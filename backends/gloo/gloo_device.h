// Which address gloo's TCP transport listens on: the interface choice of a gloo group.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include <gloo/transport/device.h>

#include "backends/gloo/gloo_config.h"

namespace distcomm {
namespace gloo {

// From the group's GlooConfig, first set wins:
//   "ifname"      an interface name (eth0): its first address;
//   "hostname"    an address or a name that resolves to one of this host's addresses;
//   "master_addr" the local address that routes to the job's master (127.0.0.1 for a
//                 loopback master), so ranks bind where their peers can reach them;
//   otherwise     this host's name if it resolves, else 127.0.0.1.
// init_process_group fills "ifname" from DISTCOMM_SOCKET_IFNAME and "master_addr" from the
// rendezvous; this code reads no environment. *chosen says what was picked and why. A name
// is looked up by `deadline` (the group's init deadline) and reaches gloo as the numeric
// address it stands for.
std::shared_ptr<::gloo::transport::Device> create_tcp_device(const GlooConfig& config, std::string* chosen,
                                                             std::chrono::steady_clock::time_point deadline);

// The local IPv4/IPv6 address the kernel would use to reach `host` (no packet is sent),
// host looked up by `deadline`. Throws InvalidArgument when host does not resolve in time
// or no route leads there.
std::string local_address_towards(const std::string& host, std::chrono::steady_clock::time_point deadline);

}  // namespace gloo
}  // namespace distcomm
