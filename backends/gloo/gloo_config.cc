#include "backends/gloo/gloo_config.h"

#include "api/plugin/config_reader.h"

namespace distcomm {
namespace gloo {

const distcomm_config_key kConfigKeys[] = {
    {"ifname", "", "DISTCOMM_SOCKET_IFNAME",
     "network interface to listen on (like GLOO_SOCKET_IFNAME); without it and hostname: the local address "
     "that routes to master_addr, else this host's name, else 127.0.0.1"},
    {"hostname", "", nullptr, "an address (or a name of one) of this host to listen on, when ifname is not set"},
    {"algorithm", "auto", "DISTCOMM_GLOO_ALGORITHM",
     "all_reduce algorithm: auto, ring, ring_chunked, halving_doubling or bcube (auto: bcube up to 1 MiB (512 KiB "
     "on 2 ranks), the ring above and below 2 elements per rank)"},
    {"worker_sched", "normal", "DISTCOMM_GLOO_WORKER_SCHED",
     "scheduling of the group's worker thread, which runs the ops nobody waits for (a waiter runs its own): "
     "normal, or batch (SCHED_BATCH: fewer context switches where the ranks have the cores to themselves, slower "
     "when other threads keep every core busy)"},
    {"loop_sched", "batch", "DISTCOMM_GLOO_LOOP_SCHED",
     "scheduling of gloo's network threads (network_threads; each reads every connection of the groups it serves, "
     "and keeps the real-time policy and CPU affinity of the thread that made it): batch (SCHED_BATCH: it does "
     "not preempt the thread it wakes beside, which may hold the connection's lock; without real-time priority "
     "that preemption made it spin for a whole time slice), or normal; a real-time policy the program set is kept"},
    {"network_threads", "1", "DISTCOMM_GLOO_NETWORK_THREADS",
     "how many gloo network threads a process's groups (with the same listening choice and loop_sched) spread "
     "over, 1 to 64: a group gets a thread of its own while there are fewer, then shares the one the fewest "
     "groups use. Each wakes 100 times a second at rest; groups that run ops at once on one thread share "
     "its core (PyTorch makes one per group): more pays only where the ranks have spare cores"},
    {nullptr, nullptr, nullptr, nullptr},
};

GlooConfig GlooConfig::parse(const std::map<std::string, std::string>& config) {
  // An empty value has always meant "not set" for gloo's keys (ifname="" falls through to
  // hostname, algorithm="" is auto), so empty values are dropped before reading.
  std::map<std::string, std::string> set;
  for (const auto& [key, value] : config) {
    if (!value.empty()) set.emplace(key, value);
  }
  const ConfigReader r(set, "gloo");
  GlooConfig c;
  c.ifname = r.text("ifname");
  c.hostname = r.text("hostname");
  c.master_addr = r.text("master_addr");
  c.algorithm = r.choice("algorithm", c.algorithm,
                         {{"auto", AllReduceAlgorithm::kAuto},
                          {"ring", AllReduceAlgorithm::kRing},
                          {"ring_chunked", AllReduceAlgorithm::kRingChunked},
                          {"halving_doubling", AllReduceAlgorithm::kHalvingDoubling},
                          {"bcube", AllReduceAlgorithm::kBcube}});
  const std::initializer_list<std::pair<const char*, ThreadScheduling>> policies = {
      {"normal", ThreadScheduling::kNormal}, {"batch", ThreadScheduling::kBatch}};
  c.worker_sched = r.choice("worker_sched", c.worker_sched, policies);
  c.loop_sched = r.choice("loop_sched", c.loop_sched, policies);
  c.network_threads = static_cast<int>(r.integer("network_threads", c.network_threads, 1, 64));
  return c;
}

}  // namespace gloo
}  // namespace distcomm
