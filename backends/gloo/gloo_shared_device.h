// The TCP devices a gloo group's connections go through: network_threads per process and
// listening choice (default 1), shared by every gloo group of the process that makes the
// same choice.
//
// Why shared: a gloo TCP device owns a network thread whose epoll_wait returns every 10 ms
// even when nothing happens (gloo's Loop). A device per group, as PyTorch's ProcessGroupGloo
// makes, is ~105 context switches a second per group and rank at rest: 225 groups of 3 ranks
// made group creation crawl on a 2-core host (25 groups in 0.75 s at first, the 225th to
// 250th in 87 s, under load). Why a setting for more than one: the thread reads every byte
// its groups receive, so groups that run ops at once on one thread share its core, which
// matters where the ranks have cores to spare. Not on 2 cores and 2 ranks: two groups'
// concurrent all_reduces ran 1.98 GB/s together on one thread, 1.92 on two at 1 MiB, 1.80
// and 1.68 at 16 MiB (medians of 3 alternating rounds), so one is the default. A group gets a device of its own while there are fewer than network_threads,
// then shares the one that the fewest groups use; a group's own connections, their locks
// and failures stay its own (pairs belong to the group's context, not to the device). Each
// thread is set up once, by the group that made it: it inherits that creating thread's
// real-time policy and CPU affinity, which a later group's creator does not change.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <gloo/transport/device.h>

#include "backends/gloo/gloo_config.h"

namespace distcomm {
namespace gloo {

// A device of the process for `config`'s listening choice (create_tcp_device, gloo_device.h)
// and network-thread scheduling (set_up_loop_thread, gloo_loop_thread.h), made by a group
// that asks while there are fewer than config.network_threads, kept while any group holds
// it. *chosen says what was picked and why. A creation is bounded by `deadline`; its errors
// are create_tcp_device's.
std::shared_ptr<::gloo::transport::Device> shared_tcp_device(const GlooConfig& config, std::string* chosen,
                                                             std::chrono::steady_clock::time_point deadline,
                                                             std::chrono::milliseconds loop_setup_deadline);

}  // namespace gloo
}  // namespace distcomm
