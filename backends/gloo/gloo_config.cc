#include "backends/gloo/gloo_config.h"

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
    {nullptr, nullptr, nullptr, nullptr},
};

}  // namespace gloo
}  // namespace distcomm
