// A launcher's heartbeat in the rendezvous store: a thread that adds 1 to hb/<id> every
// interval over its own connection, so that a slow request elsewhere never delays a beat.
// The others take the launcher for gone when the counter stops moving (Liveness).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "api/store/store.h"

namespace distcomm {
namespace launch {

class Heartbeat {
 public:
  // connect makes the thread's store client (called on the thread). A failure to connect,
  // or a store that goes away (refuses connections, or has not answered for
  // --rdzv_timeout_s: the endpoint's clients wait out a silence, rendezvous_endpoint.h),
  // ends the beats: the launcher's own requests meet the same store and report it.
  Heartbeat(std::function<std::unique_ptr<Store>()> connect, std::string id, std::chrono::milliseconds interval);
  ~Heartbeat();  // stops beating
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // Beats for another id from now on (a launcher taken for gone registers anew).
  void set_id(const std::string& id);

 private:
  void run(std::function<std::unique_ptr<Store>()> connect);

  const std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::string id_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace launch
}  // namespace distcomm
