#include "ft/admission_wait.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <vector>

#include "api/errors.h"
#include "ft/generation.h"
#include "ft/store_keys.h"

namespace distcomm {
namespace ft {
namespace {

// Whom the joiner waits for: generation g-1's members that have not arrived at g yet.
std::string awaited(Store& store, uint64_t g) {
  const std::optional<Store::Bytes> before = g > 1 ? read_present(store, {keys::members(g - 1)}).front() : std::nullopt;
  if (!before) return "for the job's members to form it";
  const Generation last = Generation::decode(g - 1, to_string(*before));
  // Counted before written: an arrival not written yet is read as not arrived (one report).
  std::vector<std::string> names;
  for (int64_t n = 1, count = store.add(keys::arrivals(g), 0); n <= count; ++n) names.push_back(keys::arrival(g, n));
  std::vector<std::string> came;
  for (const std::optional<Store::Bytes>& id : read_present(store, names)) {
    if (id) came.push_back(to_string(*id));
  }
  std::vector<std::string> missing;
  for (const std::string& id : last.members) {
    if (std::find(came.begin(), came.end(), id) == came.end()) missing.push_back(id);
  }
  const std::string of = "generation " + std::to_string(g - 1) + "'s members";
  if (missing.empty()) return "which " + of + " (" + id_list(last.members) + ") have all arrived at: it is being formed";
  return "for " + id_list(missing) + " to arrive (" + of + ", who take waiting joiners in at the end of a step)";
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

}  // namespace ft
}  // namespace distcomm
