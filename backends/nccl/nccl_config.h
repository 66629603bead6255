// The nccl backend's settings, read from BackendOptions.config (filled at the edge from
// flags or the environment; see docs/environment.md). Keys other backends use are ignored,
// since one map serves every backend of a "cpu:gloo,cuda:nccl" group; a known key with a bad
// value is an InvalidArgument naming the key and what it accepts.
#pragma once

#include <chrono>
#include <map>
#include <string>

#include "api/plugin/plugin.h"

namespace distcomm {
namespace nccl {

// The keys below as the plugin declares them, ended by an entry whose name is nullptr
// ("local_rank" is one init sets for every backend).
extern const distcomm_config_key kConfigKeys[];

struct NcclConfig {
  // "blocking_wait": Work::wait() blocks the host until the op has ended (and throws its
  // error). Off: wait() only makes the caller's CUDA stream wait for the op, like c10d.
  bool blocking_wait = false;
  // "eager_init": create the communicator of `device_id` while the group is created,
  // instead of at the first op on that device.
  bool eager_init = false;
  // "device_id": the device of eager init and of barrier (which has no tensor to say).
  // -1: local_rank modulo the visible devices (one GPU per rank on each host).
  int device_id = -1;
  // "local_rank": this rank's index on its host (the launcher's LOCAL_RANK), for the
  // default device. -1: unknown, the group rank stands in for it.
  int local_rank = -1;
  // "nonblocking": create communicators in NCCL's nonblocking mode, so that setup and
  // enqueueing return at once and are polled against the op's timeout; a rank that never
  // arrives then makes a Timeout, not a hang. Off only for debugging NCCL itself.
  bool nonblocking = true;
  // "watchdog_poll_us": how often the watchdog checks the ops in flight.
  std::chrono::microseconds watchdog_poll{1000};
  // "shutdown_grace_ms": how long destroying the group waits for ops still running on the
  // GPU (Work::wait() does not wait for them) before it aborts them. 0: abort at once.
  std::chrono::milliseconds shutdown_grace{10000};

  static NcclConfig parse(const std::map<std::string, std::string>& config);
};

}  // namespace nccl
}  // namespace distcomm
