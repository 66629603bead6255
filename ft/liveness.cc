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

const MemberRecord* Liveness::written_record(const std::string& id) {
  auto it = records_.find(id);
  if (it == records_.end() && store_->check({keys::member(id)})) {
    it = records_.emplace(id, MemberRecord::decode(store_->get_string(keys::member(id)))).first;
  }
  return it == records_.end() ? nullptr : &it->second;
}

std::string Liveness::gone_here(const std::string& id) {
  const MemberRecord* record = written_record(id);
  return record ? process_gone(*record) : "";
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
  // Blind for the timeout: what it read before says nothing of now. Not less: the monitor
  // reads once per interval, which may be half the timeout, plus its tick's calls (a
  // threshold of half the timeout judged nobody there). A shorter stall needs no discount:
  // a member's beat blocked in it is answered as the stall ends, before the timeout.
  const bool blind = now - beat.read_at >= heartbeat_timeout_;  // also on the first read
  beat.read_at = now;
  if (count != beat.count || blind) {
    beat = {count, now, now};
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

void Liveness::fence(const std::string& id, const std::string& why) {
  const std::string first = to_string(store_->compare_set(keys::dead(id), {}, to_bytes(why)));
  // A refused joiner ends on its own, saying why; killing it would cut that short.
  if (first.rfind(kRefusedMark, 0) == 0) return;
  const MemberRecord* record = written_record(id);
  if (!record) return;
  local::FencedMember fenced;
  fenced.id = id;
  fenced.domain = record->domain;
  fenced.pid = record->pid;
  fenced.start_ticks = record->start_ticks;
  fenced.why = first;
  store_->compare_set(keys::fenced(id), {}, to_bytes(fenced.encode()));
}

std::string fenced_message(const std::string& id, const std::string& why) {
  return "ft: member '" + id + "' was taken for gone by its group (" + why +
         ") and is fenced: it cannot rejoin the job, and ends here (a member that stops beating for the heartbeat "
         "timeout, stopped or stalled, is dropped for good)";
}

}  // namespace ft
}  // namespace distcomm
