#include "launch/heartbeat.h"

namespace distcomm {
namespace launch {

Heartbeat::Heartbeat(std::function<std::unique_ptr<Store>()> connect, std::string id,
                     std::chrono::milliseconds interval)
    : interval_(interval), id_(std::move(id)) {
  thread_ = std::thread([this, connect = std::move(connect)] { run(connect); });
}

Heartbeat::~Heartbeat() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Heartbeat::set_id(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  id_ = id;
}

void Heartbeat::run(std::function<std::unique_ptr<Store>()> connect) {
  // Nothing may escape this thread: a store error ends the beats.
  try {
    std::unique_ptr<Store> store = connect();
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      const std::string key = "hb/" + id_;
      lock.unlock();
      store->add(key, 1);
      lock.lock();
      wake_.wait_for(lock, interval_, [this] { return stop_; });
    }
  } catch (...) {
    // Silence is what the others will see, as from a launcher that went away.
  }
}

}  // namespace launch
}  // namespace distcomm
