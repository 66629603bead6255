#include "ft/admission_wait.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <vector>

#include "api/errors.h"
#include "api/logging.h"
#include "ft/generation.h"
#include "ft/store_keys.h"

namespace distcomm {
namespace ft {
namespace {

// Who has arrived at generation g so far (a joiner among them), in the order they came.
std::vector<std::string> arrived_at(Store& store, uint64_t g) {
  // Counted before written: an arrival not written yet is read as not arrived (one report).
  std::vector<std::string> names;
  for (int64_t n = 1, count = store.add(keys::arrivals(g), 0); n <= count; ++n) names.push_back(keys::arrival(g, n));
  std::vector<std::string> came;
  for (const std::optional<Store::Bytes>& id : read_present(store, names)) {
    if (id) came.push_back(to_string(*id));
  }
  return came;
}

// Whom the joiner waits for: generation g-1's members that have not arrived at g yet.
std::string awaited(Store& store, uint64_t g) {
  const std::optional<Store::Bytes> before = g > 1 ? read_present(store, {keys::members(g - 1)}).front() : std::nullopt;
  if (!before) return "for the job's members to form it";
  const Generation last = Generation::decode(g - 1, to_string(*before));
  const std::vector<std::string> came = arrived_at(store, g);
  std::vector<std::string> missing;
  for (const std::string& id : last.members) {
    if (std::find(came.begin(), came.end(), id) == came.end()) missing.push_back(id);
  }
  const std::string of = "generation " + std::to_string(g - 1) + "'s members";
  if (missing.empty()) return "which " + of + " (" + id_list(last.members) + ") have all arrived at: it is being formed";
  return "for " + id_list(missing) + " to arrive (" + of + ", who take waiting joiners in at the end of a step)";
}

// What the store says of the job's first generation: the latest one, formed meanwhile (the
// wait sees it at its next poll), or who has arrived at generation 1.
std::string first_generation_known(Store& store) {
  const std::optional<Store::Bytes> latest = read_present(store, {keys::kLatest}).front();
  if (latest) {
    const uint64_t g = std::stoull(to_string(*latest));
    const std::optional<Store::Bytes> members = read_present(store, {keys::members(g)}).front();
    return "the latest is " + (members ? Generation::decode(g, to_string(*members)).describe()
                                       : "generation " + std::to_string(g)) + ", formed just now";
  }
  const std::vector<std::string> came = arrived_at(store, 1);
  return "no generation yet; arrived at generation 1: " + id_list(came) +
         (came.empty() ? " (the job's first members have not started their first step)" : "");
}

}  // namespace

std::string admission_wait_line(Store& store, const std::string& me, uint64_t g,
                                std::chrono::steady_clock::duration waited, std::chrono::steady_clock::duration left) {
  std::string whom;
  try {
    whom = awaited(store, g);
  } catch (const Error& e) {
    whom = "(whom it waits for is unknown: " + std::string(e.what()) + ")";
  }
  return "ft: joiner '" + me + "' has waited " + seconds_text(waited) + " to be taken in by generation " +
         std::to_string(g) + ", " + whom + " (it gives up in " + seconds_text(left) + ")";
}

std::string first_generation_wait_line(Store& store, const std::string& me, std::chrono::steady_clock::duration waited,
                                       std::chrono::steady_clock::duration left) {
  std::string known;
  try {
    known = first_generation_known(store);
  } catch (const Error& e) {
    known = "what the store holds of it is unknown: " + std::string(e.what());
  }
  return "ft: joiner '" + me + "' has waited " + seconds_text(waited) +
         " for the job's first generation to be formed, before it can check its state against the members' (" +
         known + ") (it gives up in " + seconds_text(left) + ")";
}

void await_first_generation(Store& store, const std::string& me, std::chrono::milliseconds timeout,
                            std::chrono::milliseconds report_every) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point started = Clock::now(), deadline = started + timeout;
  Clock::time_point next_report = started + report_every;
  for (;;) {
    // One wait until the next report or the deadline, whichever comes first.
    const Clock::time_point until = std::min(deadline, next_report);
    try {
      store.wait({keys::kLatest}, std::max(std::chrono::milliseconds(1),
                                           std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now())));
      return;
    } catch (const Timeout&) {
    }
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      std::string known;
      try {
        known = first_generation_known(store);
      } catch (const Error& e) {
        known = "the store did not say more: " + std::string(e.what());
      }
      throw Timeout("ft::Manager: joiner '" + me + "' waited " + std::to_string(timeout.count()) +
                    " ms for the job's first generation (" + known + ")");
    }
    if (now >= next_report) {
      log_line(first_generation_wait_line(store, me, now - started, deadline - now));
      next_report = now + report_every;
    }
  }
}

}  // namespace ft
}  // namespace distcomm
