// The settings the gloo backend reads from BackendOptions::config: the keys its plugin
// declares, and GlooConfig, what they say, parsed once when a group is created. No gloo
// here, so that the plugin built without libgloo declares the same keys.
#pragma once

#include <map>
#include <string>

#include "api/plugin/plugin.h"
#include "backends/gloo/gloo_all_reduce.h"

namespace distcomm {
namespace gloo {

// Ended by an entry whose name is nullptr (distcomm_plugin_v1::config_keys).
extern const distcomm_config_key kConfigKeys[];

// How one of the group's threads is scheduled: the worker ("worker_sched"; gloo_worker.h says
// what each does) and gloo's network thread ("loop_sched"; gloo_loop_thread.h).
enum class ThreadScheduling { kNormal, kBatch };

struct GlooConfig {
  // Where the TCP transport listens, first set wins (gloo_device.h): "ifname", "hostname",
  // then the core's "master_addr".
  std::string ifname;
  std::string hostname;
  std::string master_addr;
  AllReduceAlgorithm algorithm = AllReduceAlgorithm::kAuto;  // "algorithm"
  ThreadScheduling worker_sched = ThreadScheduling::kNormal;  // "worker_sched"
  ThreadScheduling loop_sched = ThreadScheduling::kBatch;     // "loop_sched"
  // How many network threads (TCP devices) the process's groups with the same listening
  // choice and loop_sched spread over ("network_threads", gloo_shared_device.h).
  int network_threads = 1;

  // An empty value is the default, as an absent one. Throws InvalidArgument naming the
  // key, the value and what it accepts (api/plugin/config_reader.h), before the rendezvous.
  static GlooConfig parse(const std::map<std::string, std::string>& config);
};

}  // namespace gloo
}  // namespace distcomm
