#include "backends/nccl/nccl_config.h"

#include "api/plugin/config_reader.h"

namespace distcomm {
namespace nccl {

const distcomm_config_key kConfigKeys[] = {
    {"blocking_wait", "0", nullptr,
     "1: Work::wait() blocks the host until the op has ended; 0: it makes the caller's stream wait for it"},
    {"eager_init", "0", nullptr, "1: create the communicator of device_id with the group, not at the first op"},
    {"device_id", "-1", nullptr, "the device of eager init and barrier; -1: local_rank modulo the visible devices"},
    {"nonblocking", "1", nullptr, "1: NCCL's nonblocking communicators, polled against the op's timeout"},
    {"watchdog_poll_us", "1000", nullptr, "how often the watchdog checks the ops in flight, in microseconds"},
    {"shutdown_grace_ms", "10000", nullptr,
     "how long destroying the group waits for ops still running on the GPU (Work::wait() does not wait for them) before it aborts them, in milliseconds; 0: at once"},
    {nullptr, nullptr, nullptr, nullptr},
};

NcclConfig NcclConfig::parse(const std::map<std::string, std::string>& config) {
  NcclConfig c;
  const ConfigReader r(config, "nccl");
  c.blocking_wait = r.boolean("blocking_wait", c.blocking_wait);
  c.eager_init = r.boolean("eager_init", c.eager_init);
  c.nonblocking = r.boolean("nonblocking", c.nonblocking);
  c.device_id =
      static_cast<int>(r.integer("device_id", c.device_id, -1, 1 << 20, "a CUDA device index (or -1: automatic)"));
  c.local_rank =
      static_cast<int>(r.integer("local_rank", c.local_rank, -1, 1 << 20, "a rank index on this host (or -1: unknown)"));
  c.watchdog_poll = std::chrono::microseconds(r.integer("watchdog_poll_us", c.watchdog_poll.count(), 10, 10000000));
  c.shutdown_grace = std::chrono::milliseconds(r.integer("shutdown_grace_ms", c.shutdown_grace.count(), 0, 3600000));
  return c;
}

}  // namespace nccl
}  // namespace distcomm
