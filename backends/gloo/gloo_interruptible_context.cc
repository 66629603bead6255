#include "backends/gloo/gloo_interruptible_context.h"

#include <gloo/types.h>

#include "backends/gloo/gloo_fail_pairs.h"

namespace distcomm {
namespace gloo {

// gloo's buffer behind one the group's ops use. Every call goes to gloo's buffer; a wait
// also ends, throwing, when the context is interrupted.
class InterruptibleBuffer final : public ::gloo::transport::UnboundBuffer {
 public:
  InterruptibleBuffer(std::unique_ptr<::gloo::transport::UnboundBuffer> gloo_buffer, InterruptibleContext& owner)
      : UnboundBuffer(gloo_buffer->ptr, gloo_buffer->size), gloo_(std::move(gloo_buffer)), owner_(owner) {
    interrupted_ = owner_.add(this);
  }
  // Deregistered first: interrupt() touches gloo's buffer only while this is registered.
  ~InterruptibleBuffer() override { owner_.remove(this); }

  bool waitRecv(int* rank, std::chrono::milliseconds timeout) override {
    throw_if_interrupted();
    return woken_by_interrupt(gloo_->waitRecv(rank, timeout));
  }
  bool waitSend(int* rank, std::chrono::milliseconds timeout) override {
    throw_if_interrupted();
    return woken_by_interrupt(gloo_->waitSend(rank, timeout));
  }
  void abortWaitRecv() override { gloo_->abortWaitRecv(); }
  void abortWaitSend() override { gloo_->abortWaitSend(); }
  void send(int dst, uint64_t slot, size_t offset, size_t nbytes) override {
    throw_if_interrupted();
    gloo_->send(dst, slot, offset, nbytes);
  }
  void recv(int src, uint64_t slot, size_t offset, size_t nbytes) override {
    throw_if_interrupted();
    gloo_->recv(src, slot, offset, nbytes);
  }
  void recv(std::vector<int> srcs, uint64_t slot, size_t offset, size_t nbytes) override {
    throw_if_interrupted();
    gloo_->recv(std::move(srcs), slot, offset, nbytes);
  }

  // Called by the context (its lock held, so this buffer is alive). gloo's abort makes a
  // wait in progress, or the next one, return false; waitRecv/waitSend turn that into `why`.
  void interrupt(std::exception_ptr why) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      interrupted_ = std::move(why);
    }
    gloo_->abortWaitRecv();
    gloo_->abortWaitSend();
  }

 private:
  void throw_if_interrupted() const {
    std::exception_ptr why;
    {
      std::lock_guard<std::mutex> lock(mu_);
      why = interrupted_;
    }
    if (why) std::rethrow_exception(why);
  }
  // gloo's waits return false only when aborted. gloo's algorithms ignore the result and
  // would read a buffer that was never filled, so an abort by interrupt() must throw; one
  // by anyone else (the transfer waiters' own abort) is theirs to handle.
  bool woken_by_interrupt(bool completed) const {
    if (!completed) throw_if_interrupted();
    return completed;
  }

  const std::unique_ptr<::gloo::transport::UnboundBuffer> gloo_;
  InterruptibleContext& owner_;
  mutable std::mutex mu_;
  std::exception_ptr interrupted_;
};

InterruptibleContext::InterruptibleContext(std::shared_ptr<::gloo::transport::Context> tcp)
    : ::gloo::transport::Context(tcp->rank, tcp->size), tcp_(std::move(tcp)) {
  setTimeout(tcp_->getTimeout());
}

InterruptibleContext::~InterruptibleContext() = default;

std::unique_ptr<::gloo::transport::UnboundBuffer> InterruptibleContext::createUnboundBuffer(void* ptr, size_t size) {
  return std::make_unique<InterruptibleBuffer>(tcp_->createUnboundBuffer(ptr, size), *this);
}

std::unique_ptr<::gloo::transport::UnboundBuffer> InterruptibleContext::create_unregistered_buffer(void* ptr,
                                                                                                   size_t size) {
  return tcp_->createUnboundBuffer(ptr, size);
}

void InterruptibleContext::set_timeout(std::chrono::milliseconds timeout) {
  setTimeout(timeout);
  tcp_->setTimeout(timeout);
}

std::exception_ptr InterruptibleContext::add(InterruptibleBuffer* buffer) {
  std::lock_guard<std::mutex> lock(mu_);
  live_.insert(buffer);
  return interrupted_;
}

void InterruptibleContext::remove(InterruptibleBuffer* buffer) {
  std::lock_guard<std::mutex> lock(mu_);
  live_.erase(buffer);
}

bool InterruptibleContext::interrupted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return interrupted_ != nullptr;
}

void InterruptibleContext::interrupt(std::exception_ptr why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (interrupted_) return;
    interrupted_ = why;
  }
  // First the connections, so that a wait woken below cannot start another exchange.
  close_connections();
  std::lock_guard<std::mutex> lock(mu_);
  for (InterruptibleBuffer* buffer : live_) buffer->interrupt(why);
}

void InterruptibleContext::close_connections() {
  std::vector<int> peers;
  for (int i = 1; i < size; ++i) peers.push_back((rank + i) % size);
  fail_every_pair(*tcp_, peers);
}

}  // namespace gloo
}  // namespace distcomm
