#include "api/diagnostics/board_look.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "api/store/internal/call_deadline.h"
#include "api/store/prefix_store.h"

namespace distcomm {
namespace internal {
namespace {

using Clock = std::chrono::steady_clock;

// A look that a sooner deadline (an op's) cut short and the next one of any watch over the
// same store: when it begins within this of the cut, the store is taken as unanswered all
// along (a watch looks every tick, 0.5 s by default, and a hierarchy's watches over one
// store overlap), so its time counts toward the answer wait. Past it the next look waits
// the full answer wait afresh: a store merely slow is not to be taken for silent because
// the watch's thread was away (failing that op) after a short cut.
constexpr std::chrono::milliseconds kUnansweredGap{500};
// How much of the answer wait a look that a sooner deadline (an op's) cuts short may still
// lack and yet take the store for silent: the watch looks every tick (0.5 s by default), so
// the look under way at an op's deadline began up to a tick after the store's last answer.
// Nobody looks again before that op's Timeout is recorded (the watch's thread records it),
// and unmarked, its explanation and its publish each wait the answer wait again: a
// hierarchy's op, whose levels share the store's connection, ended 5 s past its deadline
// with the store's server stopped 3 s before it, and without saying so. A store answering
// in 400 ms, cut 150 ms into a look, is nowhere near.
constexpr std::chrono::milliseconds kCutMargin{500};
// The least a look is given, however long the store had already left looks unanswered: time
// to reconnect (a look cut short closes the connection) and to be answered by a live store.
constexpr std::chrono::milliseconds kLeastLook{300};

// Since when looks at a store have gone unanswered, in looks cut short in the call by a
// deadline sooner than their answer wait. Not yet taken for silent: a look begun 150 ms
// before an op's deadline says nothing of a store that answers in 400 ms; one whose looks
// go unanswered for the full answer wait, a few looks together, is (a hierarchy's levels
// each cut at their op's deadline, the store's server stopped 3 s before).
struct Unanswered {
  Clock::time_point since;
  Clock::time_point last_cut;
};

std::mutex& unanswered_mutex() {
  static auto* mu = new std::mutex;  // never destroyed: watch threads may outlive exit
  return *mu;
}
// By the store a board's calls end at (PrefixStore boards over the job's store share its
// connection). Keyed by address, not owned: an entry lasts kUnansweredGap after its last cut
// (dropped as others are read), so a store built later at the same address inherits nothing
// that matters.
std::map<const Store*, Unanswered>& unanswered_stores() {
  static auto* of = new std::map<const Store*, Unanswered>;
  return *of;
}

const Store* underlying(const Store& board) {
  const Store* at = &board;
  while (const auto* prefixed = dynamic_cast<const PrefixStore*>(at)) at = prefixed->base().get();
  return at;
}

// The store's unanswered stretch that a look begun at `now` continues (unanswered_mutex
// held), dropping stretches that ended too long ago.
std::optional<Unanswered> stretch_at(const Store* store, Clock::time_point now) {
  auto& of = unanswered_stores();
  for (auto it = of.begin(); it != of.end();) {
    it = now - it->second.last_cut > kUnansweredGap ? of.erase(it) : std::next(it);
  }
  auto at = of.find(store);
  if (at == of.end()) return std::nullopt;
  return at->second;
}

}  // namespace

IdleLook read_idle_look(Store& board, const std::string& request_key, const std::string& failure_key,
                        std::chrono::milliseconds answer_wait, const std::function<void()>& unanswered) {
  const Store* store = underlying(board);
  const Clock::time_point start = Clock::now();
  Clock::time_point since = start;
  {
    std::lock_guard<std::mutex> lock(unanswered_mutex());
    if (std::optional<Unanswered> s = stretch_at(store, start)) since = std::min(since, s->since);
  }
  // The answer wait counts from when the store was last found unanswered, not from now.
  const Clock::time_point own_until =
      std::max(since + answer_wait, start + std::min<std::chrono::milliseconds>(kLeastLook, answer_wait));
  std::vector<std::optional<Store::Bytes>> values;
  bool own_wait_holds = true;
  try {
    // Whether a scope around this one (the watch's, by an op's deadline) ends sooner: then a
    // look cut short says only that the store did not answer by then.
    if (const std::optional<std::chrono::milliseconds> left = StoreCallDeadline::time_left("look at the board")) {
      own_wait_holds = own_until <= start + *left;
    }
    StoreCallDeadline bounded(own_until, "the stall watch's look at the board");
    values = read_present(board, {request_key, failure_key});
  } catch (const StoreCallCutShort& e) {
    // Not when the call waited behind another thread's request (that one may be a long
    // wait the server answers in time) or was never made.
    if (e.where() == StoreCallCutShort::kInTheCall) {
      if (own_wait_holds) {
        // No answer for the full answer wait: the store is silent (marked, until a look is
        // answered); the next look waits the full wait afresh, as it did before any cut.
        {
          std::lock_guard<std::mutex> lock(unanswered_mutex());
          unanswered_stores().erase(store);
        }
        unanswered();
      } else {
        bool silent = false;
        {
          std::lock_guard<std::mutex> lock(unanswered_mutex());
          const Clock::time_point now = Clock::now();
          std::optional<Unanswered> s = stretch_at(store, now);
          const Clock::time_point from = s ? std::min(s->since, start) : start;
          silent = now - from >= answer_wait - std::min(kCutMargin, answer_wait / 2);
          if (silent) {
            unanswered_stores().erase(store);
          } else {
            unanswered_stores()[store] = Unanswered{from, now};
          }
        }
        if (silent) unanswered();  // all but the last moment of the answer wait, unanswered
      }
    }
    throw;
  }
  {
    std::lock_guard<std::mutex> lock(unanswered_mutex());
    unanswered_stores().erase(store);  // answered: whatever went unanswered before is over
  }
  IdleLook look;
  if (values.at(0)) look.requests = std::stoll(to_string(*values[0]));  // add()'s decimal text
  if (values.at(1)) look.failure_record = to_string(*values[1]);
  return look;
}

std::string look_failure_text(const std::exception& e) {
  if (!dynamic_cast<const StoreCallCutShort*>(&e)) return e.what();
  return std::string("the store's server did not answer (its process stopped, its host froze, or the network "
                     "between this host and it is down): ") +
         e.what();  // which names the store's address
}

}  // namespace internal
}  // namespace distcomm
