#include "backends/gloo/gloo_shared_device.h"

#include <pthread.h>
#include <unistd.h>

#include <map>
#include <vector>
#include <mutex>

#include "backends/gloo/gloo_device.h"
#include "backends/gloo/gloo_loop_thread.h"

namespace distcomm {
namespace gloo {
namespace {

// One of the network threads of a listening choice: a device and what made it.
struct Slot {
  std::weak_ptr<::gloo::transport::Device> device;
  std::string chosen;
  pid_t pid = 0;  // the process that made it
};

// What decides the device: the settings create_tcp_device reads and the thread's scheduling.
std::string key_of(const GlooConfig& c) {
  return "ifname=" + c.ifname + "\nhostname=" + c.hostname + "\nmaster_addr=" + c.master_addr +
         "\nloop_sched=" + std::to_string(static_cast<int>(c.loop_sched));
}

}  // namespace

std::shared_ptr<::gloo::transport::Device> shared_tcp_device(const GlooConfig& config, std::string* chosen,
                                                             std::chrono::steady_clock::time_point deadline,
                                                             std::chrono::milliseconds loop_setup_deadline) {
  // Held while a device is made, so that groups created at once from several threads still
  // share one (a second caller waits for the first's creation, bounded by the first's
  // deadline). Held across fork too (pthread_atfork), so that a child forked while another
  // thread makes a device does not inherit it locked for good.
  static std::mutex mu;
  static auto* devices = new std::map<std::string, std::vector<Slot>>();  // never destroyed: groups may outlive statics
  static std::once_flag at_fork;
  std::call_once(at_fork, [] {
    ::pthread_atfork([] { mu.lock(); }, [] { mu.unlock(); }, [] { mu.unlock(); });
  });
  std::lock_guard<std::mutex> lock(mu);
  std::vector<Slot>& slots = (*devices)[key_of(config)];
  // The live device the fewest groups hold (each holds a few references: its GlooComm and
  // its contexts; gloo's pairs hold a plain pointer), the newest among equals: the first is
  // usually the world group's, the busiest. A child forked after a group
  // was made inherits the slots, but not their network threads: it makes devices of its own.
  std::shared_ptr<::gloo::transport::Device> least;
  const Slot* least_slot = nullptr;
  int live = 0;
  for (Slot& slot : slots) {
    if (slot.pid != ::getpid()) continue;
    auto device = slot.device.lock();
    if (!device) continue;
    ++live;
    if (!least || device.use_count() <= least.use_count()) {
      least = std::move(device);
      least_slot = &slot;
    }
  }
  if (least && live >= config.network_threads) {
    *chosen = least_slot->chosen;
    return least;
  }
  auto device = create_tcp_device(config, chosen, deadline);
  // Before any connection exists, so that no byte is read by a thread not yet set up.
  set_up_loop_thread(*device, config.loop_sched, loop_setup_deadline);
  Slot* free_slot = nullptr;
  for (Slot& slot : slots) {
    if (slot.pid != ::getpid() || slot.device.expired()) free_slot = &slot;
  }
  if (!free_slot) free_slot = &slots.emplace_back();
  free_slot->device = device;
  free_slot->chosen = *chosen;
  free_slot->pid = ::getpid();
  return device;
}

}  // namespace gloo
}  // namespace distcomm
