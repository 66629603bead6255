#include "backends/nccl/nccl_config.h"

#include <cerrno>
#include <cstdlib>

#include "api/errors.h"

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

namespace {

[[noreturn]] void bad_value(const std::string& key, const std::string& value, const char* expected) {
  throw InvalidArgument("nccl backend config " + key + "='" + value + "': expected " + expected);
}

bool parse_bool(const std::string& key, const std::string& v) {
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  bad_value(key, v, "1/0, true/false, yes/no or on/off");
}

long long parse_int(const std::string& key, const std::string& v, long long min, long long max,
                    const char* expected) {
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE || n < min || n > max) bad_value(key, v, expected);
  return n;
}

}  // namespace

NcclConfig NcclConfig::parse(const std::map<std::string, std::string>& config) {
  NcclConfig c;
  auto get = [&](const char* key, auto&& apply) {
    auto it = config.find(key);
    if (it != config.end()) apply(it->first, it->second);
  };
  get("blocking_wait", [&](const std::string& k, const std::string& v) { c.blocking_wait = parse_bool(k, v); });
  get("eager_init", [&](const std::string& k, const std::string& v) { c.eager_init = parse_bool(k, v); });
  get("nonblocking", [&](const std::string& k, const std::string& v) { c.nonblocking = parse_bool(k, v); });
  get("device_id", [&](const std::string& k, const std::string& v) {
    c.device_id = static_cast<int>(parse_int(k, v, -1, 1 << 20, "a CUDA device index (or -1: automatic)"));
  });
  get("local_rank", [&](const std::string& k, const std::string& v) {
    c.local_rank = static_cast<int>(parse_int(k, v, -1, 1 << 20, "a rank index on this host (or -1: unknown)"));
  });
  get("watchdog_poll_us", [&](const std::string& k, const std::string& v) {
    c.watchdog_poll = std::chrono::microseconds(parse_int(k, v, 10, 10000000, "microseconds in [10, 10000000]"));
  });
  get("shutdown_grace_ms", [&](const std::string& k, const std::string& v) {
    c.shutdown_grace = std::chrono::milliseconds(parse_int(k, v, 0, 3600000, "milliseconds in [0, 3600000]"));
  });
  return c;
}

}  // namespace nccl
}  // namespace distcomm
