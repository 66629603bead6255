// The communicators of one backend, by name, reachable from any thread while they are set
// up and used.
//
// Its lock is held only to look a name up or add one: making a communicator object is
// cheap, and everything that waits on peers (the ncclUniqueId exchange, NCCL's setup, an
// enqueue) happens later inside the communicator, under its own lock and abortable. So a
// shutdown or abort on another thread finds every communicator, including one a rank is
// still setting up, and never waits for a peer to get hold of this lock.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/errors.h"

namespace distcomm {
namespace nccl {

template <typename Comm>
class CommRegistry {
 public:
  using Make = std::function<std::shared_ptr<Comm>()>;

  // The communicator named `name`, made by make() if there is none. make() runs under the
  // lock and must not wait. After close(), throws PeerFailure(closed_reason).
  std::shared_ptr<Comm> get_or_make(const std::string& name, const Make& make) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) throw PeerFailure(closed_reason_);
    auto it = comms_.find(name);
    if (it != comms_.end()) return it->second;
    std::shared_ptr<Comm> c = make();
    comms_.emplace(name, c);
    return c;
  }

  // The communicator named `name`, or nullptr.
  std::shared_ptr<Comm> find(const std::string& name) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = comms_.find(name);
    return it == comms_.end() ? nullptr : it->second;
  }

  // Every communicator, for the caller to close or abort; get_or_make refuses from now on
  // with `reason`. The second call returns nothing.
  std::vector<std::shared_ptr<Comm>> close(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::shared_ptr<Comm>> all;
    if (!closed_) closed_reason_ = reason;
    closed_ = true;
    for (auto& [name, c] : comms_) all.push_back(c);
    comms_.clear();
    return all;
  }

  // Every communicator, the registry unchanged.
  std::vector<std::shared_ptr<Comm>> all() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::shared_ptr<Comm>> out;
    for (const auto& [name, c] : comms_) out.push_back(c);
    return out;
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return comms_.size();
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Comm>> comms_;
  bool closed_ = false;
  std::string closed_reason_;
};

}  // namespace nccl
}  // namespace distcomm
