#include "backends/gloo/gloo_loop_thread.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>

#include <gloo/transport/tcp/device.h>

#include "backends/gloo/gloo_thread_setup.h"

namespace distcomm {
namespace gloo {
namespace {

// Registered on the loop for one readable eventfd; gloo calls handleEvents on its thread.
class SetUpOnLoop final : public ::gloo::transport::tcp::Handler {
 public:
  SetUpOnLoop(int fd, ThreadScheduling scheduling) : fd_(fd), scheduling_(scheduling) {}

  void handleEvents(int /*events*/) override {
    // The loop's epoll is level-triggered: read the count, or it calls again at once
    // until the fd is unregistered.
    uint64_t count = 0;
    (void)::read(fd_, &count, sizeof(count));
    std::lock_guard<std::mutex> lock(mu_);
    if (tid_ != 0) return;
    set_up_thread(pthread_self(), "dc-gloo-loop", scheduling_);
    tid_ = ::gettid();
    done_.notify_all();
  }

  pid_t wait(std::chrono::milliseconds deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait_for(lock, deadline, [this] { return tid_ != 0; });
    return tid_;
  }

 private:
  const int fd_;
  const ThreadScheduling scheduling_;
  std::mutex mu_;
  std::condition_variable done_;
  pid_t tid_ = 0;
};

}  // namespace

pid_t set_up_loop_thread(::gloo::transport::Device& device, ThreadScheduling scheduling,
                         std::chrono::milliseconds deadline) {
  auto* tcp = dynamic_cast<::gloo::transport::tcp::Device*>(&device);
  if (!tcp) return 0;
  const int fd = ::eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);  // readable from the start
  if (fd < 0) return 0;
  SetUpOnLoop handler(fd, scheduling);
  pid_t tid = 0;
  try {
    tcp->registerDescriptor(fd, EPOLLIN, &handler);
    tid = handler.wait(deadline);
    // Returns after a tick of the loop, so the handler is never called once it has gone.
    tcp->unregisterDescriptor(fd, &handler);
  } catch (const std::exception&) {
    // gloo refused the descriptor (epoll_ctl failed): the thread stays as it was.
  }
  ::close(fd);
  return tid;
}

}  // namespace gloo
}  // namespace distcomm
