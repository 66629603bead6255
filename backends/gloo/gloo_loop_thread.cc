#include "backends/gloo/gloo_loop_thread.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <condition_variable>
#include <memory>
#include <mutex>

#include <gloo/transport/tcp/device.h>

#include "backends/gloo/gloo_thread_setup.h"

namespace distcomm {
namespace gloo {
namespace {

// Registered on the loop for one readable eventfd; gloo calls handleEvents on its thread.
// The handler takes itself off the loop there, where gloo's unregisterDescriptor does not
// wait for the loop's next tick (up to 10 ms, paid by every group's creation otherwise).
class SetUpOnLoop final : public ::gloo::transport::tcp::Handler,
                          public std::enable_shared_from_this<SetUpOnLoop> {
 public:
  SetUpOnLoop(::gloo::transport::tcp::Device& device, int fd, ThreadScheduling scheduling)
      : device_(device), fd_(fd), scheduling_(scheduling) {}

  void handleEvents(int /*events*/) override {
    const auto keep = shared_from_this();  // the waiter may drop its reference meanwhile
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;  // the waiter gave up and is taking the fd off the loop
    set_up_thread(pthread_self(), "dc-gloo-loop", scheduling_);
    tid_ = ::gettid();
    finished_ = true;
    take_off_loop();
    done_.notify_all();
  }

  // The loop thread's id, or 0 if it did not answer within `deadline`.
  pid_t wait(std::chrono::milliseconds deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    if (done_.wait_for(lock, deadline, [this] { return finished_; })) return tid_;
    finished_ = true;
    lock.unlock();  // gloo's unregister waits for a tick, which may be in handleEvents
    take_off_loop();
    return 0;
  }

 private:
  // Once, by whoever set finished_: the fd off the loop (from another thread than the loop's,
  // gloo waits for a tick, after which handleEvents is not called again), then closed.
  void take_off_loop() {
    try {
      device_.unregisterDescriptor(fd_, this);
    } catch (const std::exception&) {
      // epoll_ctl refused: the fd was not registered; nothing calls the handler.
    }
    ::close(fd_);
  }

  ::gloo::transport::tcp::Device& device_;
  const int fd_;
  const ThreadScheduling scheduling_;
  std::mutex mu_;
  std::condition_variable done_;
  bool finished_ = false;
  pid_t tid_ = 0;
};

}  // namespace

pid_t set_up_loop_thread(::gloo::transport::Device& device, ThreadScheduling scheduling,
                         std::chrono::milliseconds deadline) {
  auto* tcp = dynamic_cast<::gloo::transport::tcp::Device*>(&device);
  if (!tcp) return 0;
  const int fd = ::eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);  // readable from the start
  if (fd < 0) return 0;
  const auto handler = std::make_shared<SetUpOnLoop>(*tcp, fd, scheduling);
  try {
    tcp->registerDescriptor(fd, EPOLLIN, handler.get());
  } catch (const std::exception&) {
    ::close(fd);  // gloo refused the descriptor (epoll_ctl failed): the thread stays as it was
    return 0;
  }
  return handler->wait(deadline);
}

}  // namespace gloo
}  // namespace distcomm
