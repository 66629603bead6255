#include "ft/forgetting.h"

#include <algorithm>
#include <string>

#include "api/errors.h"
#include "ft/generation.h"
#include "ft/store_keys.h"

namespace distcomm {
namespace ft {

uint64_t forget_steps(Store& store, uint64_t g, uint64_t from, uint64_t to) noexcept {
  try {
    for (; from < to; ++from) {
      store.delete_key(keys::done(g, from));
      store.delete_key(keys::verdict(g, from));
    }
  } catch (...) {
    // A store that stalls or is gone: the next call starts from here.
  }
  return from;
}

namespace {

// Generation x's keys but its members record; false where a store call failed.
bool forget_generation(Store& store, uint64_t x, const Generation& gen, uint64_t end_step) {
  const uint64_t from = std::max(gen.committed_steps, end_step >= kTailSteps ? end_step - kTailSteps : 0);
  if (forget_steps(store, x, from, end_step + 1) != end_step + 1) return false;
  for (const std::string& id : gen.members) store.delete_key(keys::needs_state(x, id));
  // One request (read_present): a get after a check would block where another deletion
  // (a fenced lowest member resumed) took the key in between.
  if (const std::optional<Store::Bytes> arrivals = read_present(store, {keys::arrivals(x)}).front()) {
    const int64_t count = std::stoll(to_string(*arrivals));
    for (int64_t n = 1; n <= count; ++n) store.delete_key(keys::arrival(x, n));
    store.delete_key(keys::arrivals(x));
  }
  return true;
}

}  // namespace

void forget_generations(Store& store, uint64_t below) noexcept {
  try {
    uint64_t x = store.check({keys::kForgottenBelow}) ? std::stoull(store.get_string(keys::kForgottenBelow)) : 1;
    const uint64_t start = x;
    for (; x < below; ++x) {
      // Generations are numbered without gaps (each is formed from the one before), and each
      // one's last step is the next one's first (its committed_steps): the step it aborted.
      if (!store.check({keys::members(x), keys::members(x + 1)})) continue;
      const Generation gen = Generation::decode(x, store.get_string(keys::members(x)));
      const Generation next = Generation::decode(x + 1, store.get_string(keys::members(x + 1)));
      if (!forget_generation(store, x, gen, next.committed_steps)) break;
    }
    if (x > start) store.set(keys::kForgottenBelow, std::to_string(x));
  } catch (...) {
    // Best-effort, as forget_steps: the next generation's call covers what is left.
  }
}

}  // namespace ft
}  // namespace distcomm
