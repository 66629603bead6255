#include "ft/generation.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "api/errors.h"
#include "api/logging.h"
#include "ft/admission_wait.h"
#include "ft/store_keys.h"

namespace distcomm {
namespace ft {
namespace {

// Forming polls the store: the candidates come within milliseconds of each other, and a
// wait on one key could not also watch the others' liveness.
constexpr std::chrono::milliseconds kPoll{2};

std::vector<std::string> split(const std::string& text, char by) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, by)) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Arrivals at generation g seen so far, read incrementally.
class Arrivals {
 public:
  Arrivals(Store& store, uint64_t g) : store_(store), g_(g) {}
  const std::set<std::string>& read() {
    const int64_t count = store_.add(keys::arrivals(g_), 0);
    for (; seen_ < count; ++seen_) unread_.push_back(seen_ + 1);
    // Counted before written: an id may be a moment behind its number, or never come (its
    // candidate died in between). Read the others; try that one again at the next poll.
    for (auto it = unread_.begin(); it != unread_.end();) {
      if (store_.check({keys::arrival(g_, *it)})) {
        ids_.insert(store_.get_string(keys::arrival(g_, *it)));
        it = unread_.erase(it);
      } else {
        ++it;
      }
    }
    return ids_;
  }

 private:
  Store& store_;
  uint64_t g_;
  int64_t seen_ = 0;
  std::vector<int64_t> unread_;  // counted, not yet written
  std::set<std::string> ids_;
};

void arrive(Store& store, uint64_t g, const std::string& me) {
  const int64_t n = store.add(keys::arrivals(g), 1);
  store.set(keys::arrival(g, n), me);
}

}  // namespace

std::string seconds_text(std::chrono::steady_clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", std::max(0.0, std::chrono::duration<double>(d).count()));
  return text;
}

std::string id_list(const std::vector<std::string>& ids) {
  std::string s;
  for (const std::string& id : ids) s += (s.empty() ? "" : ", ") + id;
  return s.empty() ? "nobody" : s;
}

int Generation::rank_of(const std::string& id) const {
  const auto it = std::find(members.begin(), members.end(), id);
  return it == members.end() ? -1 : static_cast<int>(it - members.begin());
}

std::string Generation::encode() const {
  std::string s = std::to_string(committed_steps) + "|";
  for (size_t i = 0; i < members.size(); ++i) s += (i ? "," : "") + members[i];
  return s;
}

Generation Generation::decode(uint64_t number, const std::string& text) {
  const auto bar = text.find('|');
  if (bar == std::string::npos) throw Error("generation " + std::to_string(number) + ": bad record '" + text + "'");
  Generation g;
  g.number = number;
  g.committed_steps = std::stoull(text.substr(0, bar));
  g.members = split(text.substr(bar + 1), ',');
  return g;
}

std::string Generation::describe() const {
  return "generation " + std::to_string(number) + " (" + id_list(members) + ")";
}

std::vector<std::string> waiting_joiners(Store& store, Liveness& liveness, const std::vector<std::string>& current,
                                         int64_t* resolved_below) {
  std::vector<std::string> out;
  const int64_t count = store.add(keys::kJoiners, 0);
  bool all_resolved = true;  // every joiner from the first read up to n
  for (int64_t n = resolved_below ? std::max<int64_t>(*resolved_below, 1) : 1; n <= count; ++n) {
    bool resolved = false;
    if (store.check({keys::joiner(n)})) {  // else counted, not yet written: next time
      const std::string id = store.get_string(keys::joiner(n));
      resolved = contains(current, id) || !liveness.gone(id, /*by_heartbeat=*/false).empty();
      if (!resolved) out.push_back(id);
    }
    all_resolved = all_resolved && resolved;
    if (all_resolved && resolved_below) *resolved_below = n + 1;
  }
  return out;
}

std::vector<std::string> waiting_joiners(Store& store, Liveness& liveness, const std::vector<std::string>& current) {
  return waiting_joiners(store, liveness, current, nullptr);
}

Generation form_generation(Store& store, Liveness& liveness, const FormRequest& request) {
  const uint64_t g = request.number;
  arrive(store, g, request.me);
  std::vector<std::string> expected = request.previous;
  if (request.admit_joiners) {
    for (const std::string& id : waiting_joiners(store, liveness, request.previous)) expected.push_back(id);
  }
  Arrivals arrivals(store, g);
  std::vector<std::string> gone;
  // A first generation waits for its ranks up to op_timeout (30 minutes): one whose launcher
  // never started would keep the others silent all that while, as init does not.
  const auto started = std::chrono::steady_clock::now();
  auto next_report = started + request.report_every;
  for (;;) {
    if (store.check({keys::members(g)})) return Generation::decode(g, store.get_string(keys::members(g)));
    const std::set<std::string>& came = arrivals.read();
    std::vector<std::string> missing;
    for (const std::string& id : expected) {
      if (came.count(id) || contains(gone, id)) continue;
      const std::string why = liveness.gone(id);
      if (why.empty()) {
        missing.push_back(id);
      } else {
        liveness.fence(id, why);
        gone.push_back(id);
      }
    }
    if (missing.empty()) {
      Generation mine;
      mine.number = g;
      mine.committed_steps = request.committed_steps;
      for (const std::string& id : expected) {
        // One that arrived and was found gone since (a dead mark: a launcher saw it exit,
        // or a monitor lost its heartbeat) is left out too, once, here.
        if (came.count(id) && !contains(gone, id) && (id == request.me || !store.check({keys::dead(id)}))) {
          mine.members.push_back(id);
        }
      }
      const std::string written = to_string(store.compare_set(keys::members(g), {}, to_bytes(mine.encode())));
      const Generation agreed = Generation::decode(g, written);
      // Newest first wins; a late writer of an older generation must not move it back.
      const std::string latest = std::to_string(g);
      std::string seen = to_string(store.compare_set(keys::kLatest, {}, to_bytes(latest)));
      while (!seen.empty() && std::stoull(seen) < g) {
        const std::string now = to_string(store.compare_set(keys::kLatest, to_bytes(seen), to_bytes(latest)));
        if (now == seen) break;
        seen = now;
      }
      return agreed;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= request.deadline) {
      throw Timeout(request.me + ": forming generation " + std::to_string(g) + " timed out waiting for " +
                    id_list(missing) + ", alive by their heartbeat but not arrived");
    }
    if (now >= next_report) {
      log_line("ft: member '" + request.me + "': forming generation " + std::to_string(g) + " has waited " +
               seconds_text(now - started) + " for " + id_list(missing) +
               " to arrive (it gives up in " +
               seconds_text(request.deadline - now) + ")");
      next_report = now + request.report_every;
    }
    std::this_thread::sleep_for(kPoll);
  }
}

void gave_up_forming(Store& store, const Generation& given_up, const std::string& me, const std::string& why) noexcept {
  try {
    store.set(keys::gave_up(me), why);
    // After its own note: of members that give up at once, the last to read sees every
    // note (each writes before it reads), so one of them writes the stop.
    std::vector<std::string> names;
    for (const std::string& id : given_up.members) {
      names.push_back(keys::gave_up(id));
      names.push_back(keys::dead(id));
    }
    const std::vector<std::optional<Store::Bytes>> read = read_present(store, names);
    for (size_t i = 0; i < read.size(); i += 2) {
      if (!read[i] && !read[i + 1]) return;  // this one may still form the next generation
    }
    store.compare_set(keys::kStopped, {},
                      to_bytes("ft: every member of " + given_up.describe() +
                               " gave up forming it or is gone: nobody is left to go on. The last: " + why));
  } catch (...) {
    // Best-effort, as above.
  }
}

Generation await_admission(Store& store, const AdmissionRequest& request) {
  const std::string& me = request.me;
  uint64_t g = store.check({keys::kLatest}) ? std::stoull(store.get_string(keys::kLatest)) + 1 : 1;
  arrive(store, g, me);
  auto next_report = request.started + request.report_every;
  for (;;) {
    // One request for both: it is asked every poll.
    const std::vector<std::optional<Store::Bytes>> ended = read_present(store, {keys::kFinished, keys::kStopped});
    if (ended[0]) return Generation{};  // training ended before it was taken in
    // The job stopped for good (StepKeepsFailing, too few members, forming given up: the
    // members write why, job_stop.cc): no generation will come to take it in.
    if (ended[1]) {
      throw Error("ft: joiner '" + me + "' was not taken in: the job it waited to join stopped. " +
                  to_string(*ended[1]));
    }
    if (store.check({keys::members(g)})) {
      Generation formed = Generation::decode(g, store.get_string(keys::members(g)));
      if (formed.rank_of(me) >= 0) return formed;
      // Formed without me: taken for gone (stopped while it waited, say), it never will be.
      if (store.check({keys::dead(me)})) throw Error(fenced_message(me, store.get_string(keys::dead(me))));
      ++g;  // I came late: the next one
      arrive(store, g, me);
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= request.deadline) {
      const std::string dead = store.check({keys::dead(me)}) ? "; it was taken for gone: " + store.get_string(keys::dead(me)) : "";
      throw Timeout(me + ": waited to join, and generation " + std::to_string(g) + " was not formed in time" + dead);
    }
    if (now >= next_report) {
      log_line(admission_wait_line(store, me, g, now - request.started, request.deadline - now));
      next_report = now + request.report_every;
    }
    std::this_thread::sleep_for(kPoll);
  }
}

}  // namespace ft
}  // namespace distcomm
