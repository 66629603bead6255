#include "ft/joiner_refusal.h"

#include <algorithm>

#include "ft/liveness.h"
#include "ft/manager.h"
#include "ft/store_keys.h"

namespace distcomm {
namespace ft {

std::vector<std::string> joiners_behind_failures(Store& store, uint64_t first, const Generation& last) {
  if (first < 2) return {};
  // The generations from the last one that committed a step up to `first`: what came and
  // went while the step kept failing. Only as far back as kLookBack: member lines are kept
  // for every generation (forgetting.h), but a longer run of uncommitted generations is
  // no joiner's doing that this rule could tell.
  const uint64_t oldest = first > kLookBack ? first - kLookBack : 1;
  std::vector<std::string> names;
  for (uint64_t g = oldest; g <= first; ++g) names.push_back(keys::members(g));
  const std::vector<std::optional<Store::Bytes>> read = read_present(store, names);
  auto generation = [&](uint64_t g) -> std::optional<Generation> {
    const std::optional<Store::Bytes>& line = read[static_cast<size_t>(g - oldest)];
    if (!line) return std::nullopt;
    return Generation::decode(g, to_string(*line));
  };
  // The last generation before `first` that committed a step (the next one began past its
  // start): its members trained fine together. Between it and `first` the step failed in
  // every generation, whoever came or went (a member lost, a second joiner, a refused one):
  // counting from `first - 1` alone let any change of members during a joiner's trial stop
  // the whole job (an outside user's probe: two misbuilt replacements; a member killed
  // while a misbuilt joiner was tried).
  std::optional<Generation> trained;
  for (uint64_t g = first - 1; g >= oldest && !trained; --g) {
    const std::optional<Generation> at = generation(g), next = generation(g + 1);
    if (!at || !next) return {};
    if (next->committed_steps > at->committed_steps) trained = at;
  }
  if (!trained) return {};
  // Did the step already fail with those members alone, before anyone came? Then it is not
  // the joiners' doing (a joiner waiting as the step first failed is taken in by the next
  // generation, and was refused for a program error: helper-186's review). An abort there
  // that lost a member may be that loss alone (the replacement case), so it counts only
  // where every member it had is still here.
  const std::optional<Generation> failing = generation(first);
  if (!failing) return {};
  const std::vector<std::optional<Store::Bytes>> verdict =
      read_present(store, {keys::verdict(trained->number, failing->committed_steps)});
  const bool all_still_here = std::all_of(trained->members.begin(), trained->members.end(), [&](const std::string& id) {
    return std::find(last.members.begin(), last.members.end(), id) != last.members.end();
  });
  if (verdict[0] && to_string(*verdict[0]).rfind("abort|", 0) == 0 && all_still_here) return {};
  std::vector<std::string> joiners;
  for (const std::string& id : last.members) {
    if (std::find(trained->members.begin(), trained->members.end(), id) == trained->members.end()) {
      joiners.push_back(id);
    }
  }
  // Nobody came (the same failure with fewer members), or nobody of the members that
  // trained is left to hold the state and go on: not the joiners' doing, as far as the store
  // can tell.
  if (joiners.empty() || joiners.size() == last.members.size()) return {};
  return joiners;
}

std::string refusal_mark(uint64_t step, uint64_t first, const Generation& last, const std::vector<std::string>& refused,
                         const std::string& first_why) {
  // Names the joiners first, each with its rank in the generation that refuses it: the
  // first failure below is in the words of the member that reported it (whose op saw the
  // mismatch first), which read as if that member had caused it (an outside user's probe).
  std::string who;
  for (const std::string& id : refused) {
    who += std::string(who.empty() ? "" : ", ") + "'" + id + "' (group rank " + std::to_string(last.rank_of(id)) +
           " of generation " + std::to_string(last.number) + ")";
  }
  const bool one = refused.size() == 1;
  return std::string(kRefusedMark) + (one ? "joiner " : "joiners ") + who + (one ? " is" : " are") +
         " refused: step " + std::to_string(step) + " failed on every member in " +
         std::to_string(kSameStepFailures) + " generations in a row (generations " + std::to_string(first) + " to " +
         std::to_string(last.number) + ") since the members before " + (one ? "it" : "them") +
         " last committed a step: " + (one ? "its" : "their") +
         " step cannot work with theirs (another model, other parameters?), so the members go on without " +
         (one ? "it" : "them") + ". The first failure with " + (one ? "it" : "them") +
         ", as the member that saw it first reported it: " + first_why;
}

std::string refused_message(const std::string& id, const std::string& mark) {
  const std::string why = mark.rfind(kRefusedMark, 0) == 0 ? mark.substr(sizeof(kRefusedMark) - 1) : mark;
  return "ft: joiner '" + id + "' was refused, and ends here; the job goes on without it: " + why;
}

void say_job_stopped(Store& store, const std::string& why) noexcept {
  try {
    store.compare_set(keys::kStopped, {}, to_bytes(why));
  } catch (...) {
    // Best-effort: a joiner that cannot read it waits out its recovery timeout, as before.
  }
}

}  // namespace ft
}  // namespace distcomm
