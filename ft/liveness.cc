#include "ft/liveness.h"

#include "ft/store_keys.h"

namespace distcomm {
namespace ft {

Liveness::Liveness(StorePtr store, std::chrono::milliseconds heartbeat_timeout)
    : store_(std::move(store)), heartbeat_timeout_(heartbeat_timeout) {}

const MemberRecord& Liveness::record(const std::string& id, std::chrono::milliseconds wait) {
  auto it = records_.find(id);
  if (it != records_.end()) return it->second;
  store_->wait({keys::member(id)}, wait);
  return records_.emplace(id, MemberRecord::decode(store_->get_string(keys::member(id)))).first->second;
}

std::string Liveness::gone_here(const std::string& id) {
  auto it = records_.find(id);
  if (it == records_.end() && store_->check({keys::member(id)})) {
    it = records_.emplace(id, MemberRecord::decode(store_->get_string(keys::member(id)))).first;
  }
  return it == records_.end() ? "" : process_gone(it->second);
}

std::string Liveness::gone(const std::string& id, bool by_heartbeat) {
  if (store_->check({keys::dead(id)})) return store_->get_string(keys::dead(id));
  const std::string here = gone_here(id);
  if (!here.empty()) return here;
  if (!by_heartbeat) return "";
  const int64_t count = store_->add(keys::heartbeat(id), 0);
  // No beat yet: the process has not started its Manager (a rank that starts late, loads
  // its data first, or is on a slow host). Its absence is the forming deadline's to judge,
  // not the heartbeat's: a heartbeat can only stop once it has begun.
  if (count == 0) return "";
  const Clock::time_point now = Clock::now();
  Beat& beat = beats_[id];
  if (count != beat.count) {
    beat = {count, now};
    return "";
  }
  if (now - beat.since < heartbeat_timeout_) return "";
  return "its heartbeat has not moved for " +
         std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now - beat.since).count()) +
         " ms (heartbeat timeout " + std::to_string(heartbeat_timeout_.count()) + " ms)";
}

void Liveness::mark_dead(const std::string& id, const std::string& why) {
  store_->compare_set(keys::dead(id), {}, to_bytes(why));
}

}  // namespace ft
}  // namespace distcomm
