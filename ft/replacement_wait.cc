// replacement_outlook (replacement_wait.h) and Manager::await_replacements (manager.h): the
// survivors of a generation short of members wait for the replacements that are due.
#include "ft/replacement_wait.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "api/errors.h"
#include "api/logging.h"
#include "ft/liveness_monitor.h"
#include "ft/manager.h"
#include "ft/store_keys.h"

namespace distcomm {
namespace ft {
namespace {

using Clock = std::chrono::steady_clock;

// How often a waiting survivor looks: a replacement's start-up takes far longer (~1 s),
// and each look costs a few store requests per replaced rank, from every survivor: at 20 ms,
// 59 survivors of 64 waiting for 5 replacements would ask node 0's store ~75k times a second
// (helper-217's review), at 200 ms a tenth of that.
constexpr std::chrono::milliseconds kPoll{200};

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::optional<std::string> read_key(Store& store, const std::string& key) {
  const std::optional<Store::Bytes> value = read_present(store, {key}).front();
  if (!value) return std::nullopt;
  return to_string(*value);
}

std::string seconds(Clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", std::chrono::duration<double>(d).count());
  return text;
}

}  // namespace

ReplacementOutlook replacement_outlook(Store& store, Liveness& liveness, const Generation& formed,
                                       Clock::time_point deadline) {
  ReplacementOutlook o;
  o.joiners = waiting_joiners(store, liveness, formed.members);
  const std::optional<std::string> ranks = read_key(store, keys::kReplacedRanks);
  if (!ranks) return o;  // no launcher says it replaces anyone
  o.announced = true;
  std::istringstream in(*ranks);
  std::string rank;
  while (std::getline(in, rank, ',')) {
    std::string id = "rank" + rank;
    // The launcher names its processes so; a program that names its members itself is not
    // followed (its words would name ids that never come).
    if (rank.empty() || !store.check({keys::member(id)})) continue;
    std::optional<Clock::time_point> due;  // of `id`, once it is a successor
    // Along the rank's processes, each one's successor, to the last one: a replacement that
    // died has the launcher's word too (its own successor, or none), so a chain ends.
    for (int hop = 0; hop <= 1000; ++hop) {
      if (formed.rank_of(id) >= 0 || contains(o.joiners, id)) break;  // here, or can be taken in now
      const std::optional<std::string> word = read_key(store, keys::successor(id));
      if (word && word->rfind("due|", 0) == 0) {
        const size_t bar = word->find('|', 4);
        if (bar == std::string::npos) break;
        const std::string next = word->substr(4, bar - 4);
        const auto at = std::chrono::system_clock::time_point(std::chrono::milliseconds(
            std::strtoll(word->c_str() + bar + 1, nullptr, 10)));
        // In this host's steady clock: the launcher's wall clock may be another host's.
        due = Clock::now() + std::chrono::duration_cast<Clock::duration>(at - std::chrono::system_clock::now());
        id = next;
        continue;
      }
      if (word) {  // "none|<why>"
        o.none.push_back(id + ": " + word->substr(word->find('|') + 1));
        break;
      }
      if (!liveness.gone(id, /*by_heartbeat=*/false).empty()) {
        o.unsaid.push_back(id);  // ended (or taken for gone): the launcher's word follows
      } else if (hop > 0) {
        // Announced, not registered yet: starting (its record written), or not yet started.
        (store.check({keys::member(id)}) || !due || *due <= deadline ? o.coming : o.too_late).push_back(id);
      }
      break;
    }
  }
  return o;
}

std::optional<Clock::duration> Manager::await_replacements(const Generation& formed, Clock::time_point deadline) {
  const size_t have = formed.members.size(), need = static_cast<size_t>(options_.min_members);
  const std::string too_few = "ft: member '" + id_ + "': only " + std::to_string(have) +
                              (have == 1 ? " member is" : " members are") + " left in " + formed.describe() +
                              ", fewer than the program's minimum of " + std::to_string(options_.min_members) +
                              "; stopping";
  const Clock::time_point began = Clock::now();
  // A gone member with no word yet: its launcher sees the exit within milliseconds and says
  // what follows. One that has said nothing within a heartbeat timeout will not.
  std::map<std::string, Clock::time_point> unsaid_since;
  bool waited = false;  // for a replacement (not only for the launcher's word)
  for (;;) {
    // Whatever it waits for, it still ends as a member would in a step.
    const std::string fenced = monitor_->fenced();
    if (!fenced.empty()) throw_taken_out(fenced);
    throw_if_store_lost();
    // Every line below is said from this one look: a line that named what it waited for at
    // the last look beside what it reads now called a joiner "waiting" that the same line
    // said was not replaced (it had died since; an outside user's probe).
    const ReplacementOutlook o = replacement_outlook(*store_, *liveness_, formed, deadline);
    const std::string waited_text =
        waited ? " (it waited " + seconds(Clock::now() - began) + " for the replacements its launcher announced)" : "";
    if (const std::optional<std::string> stopped = read_key(*store_, keys::kStopped)) {
      // Another member stopped the job (its own deadline passed first, say): so does this one.
      stop_job(std::make_exception_ptr(Error(too_few + waited_text + "; the job stopped meanwhile: " + *stopped)));
    }
    if (o.announced && have + o.joiners.size() >= need) {
      // The joiners taken in are said once the next generation is formed (form_next): more
      // may come in with it than were waiting at this look.
      if (waited) return Clock::now() - began;
      return std::nullopt;
    }
    const Clock::time_point now = Clock::now();
    size_t unsaid = 0;
    for (const std::string& id : o.unsaid) {
      if (now - unsaid_since.emplace(id, now).first->second < options_.heartbeat_timeout) ++unsaid;
    }
    if (!o.announced || have + o.joiners.size() + o.coming.size() + unsaid < need) {
      // Nothing due that could make up the numbers: as before any wait, at once.
      // Why it does not wait (or waits no longer), whether or not it waited: a bare "stopping"
      // left a user who had asked for replacements guessing.
      std::string why;
      if (!o.announced) {
        why = "; no replacement is announced (only node 0's distcomm launcher announces them, with "
              "--on_failure=continue and --replace_after_s)";
      }
      if (!o.none.empty()) why += "; not replaced: " + id_list(o.none);
      if (!o.too_late.empty()) why += "; due after its recovery timeout: " + id_list(o.too_late);
      if (!o.coming.empty()) why += "; still coming: " + id_list(o.coming);
      if (!o.joiners.empty()) why += "; joiners waiting: " + id_list(o.joiners);
      stop_job(std::make_exception_ptr(Error(too_few + waited_text + why)));
    }
    std::string awaited = "the replacements its launcher announced (" + id_list(o.coming) + ")";
    if (!o.joiners.empty()) awaited += " beside the joiners waiting (" + id_list(o.joiners) + ")";
    if (now >= deadline) {
      stop_job(std::make_exception_ptr(Error(
          too_few + waited_text + ": the replacements due did not come within its recovery timeout (" +
          std::to_string(options_.recovery_timeout.count()) + " ms for the forming); still awaited: " +
          id_list(o.coming) + (o.joiners.empty() ? "" : "; joiners waiting: " + id_list(o.joiners)))));
    }
    if (!waited && !o.coming.empty()) {
      waited = true;
      if (formed.rank_of(id_) == 0) {
        log_line(too_few.substr(0, too_few.size() - std::string("; stopping").size()) + "; waiting up to " +
                 seconds(deadline - now) + " (its recovery timeout) for " + awaited);
      }
    }
    std::this_thread::sleep_for(kPoll);
  }
}

void Manager::log_joiners_taken_in(const std::vector<std::string>& short_of_members, const Generation& next,
                                   Clock::duration waited) const {
  if (next.rank_of(id_) != 0) return;
  // Counted from the generation formed, not from the look that ended the wait: the joiners
  // that registered in between come in with it too ("1 joiner(s) came" of a generation that
  // took in two).
  std::vector<std::string> joined;
  for (const std::string& id : next.members) {
    if (!contains(short_of_members, id)) joined.push_back(id);
  }
  log_line("ft: member '" + id_ + "': " + std::to_string(joined.size()) +
           (joined.size() == 1 ? " joiner (" : " joiners (") + id_list(joined) + ") came after " + seconds(waited) +
           "; formed " + next.describe() + " with " + (joined.size() == 1 ? "it" : "them"));
}

}  // namespace ft
}  // namespace distcomm
