// A joiner of a fault-tolerant job that the members refused (ft/joiner_refusal.h): its step
// made every member's fail (a misbuilt replacement: one parameter more), or its state
// differs from theirs. They go on without it; its Manager ends it (StepKeepsFailing,
// InvalidArgument) and its process exits non-zero. The launcher that started it, on
// whatever machine, learns of the refusal from the member's dead mark, "ft/dead/<id>" with a
// value that starts "refused: " (ft/store_keys.h, ft/liveness.h's kRefusedMark), which it
// asks the job's store for (refusal_reader.h): that exit is then not the job's failure, and no
// replacement is started for it -- the same program would be refused again, at the cost of
// more failed generations each time.
//
// Header-only, and the names are spelled here: the launcher does not link ft/ (nor the
// core). tests/tools/launch/refused_replacement_test.cc checks them against ft/'s own.
#pragma once

#include <optional>
#include <string>

#include "api/process/fenced_member.h"

namespace distcomm {
namespace launch {

// ft::keys::dead("") under ft::keys::kRoot, as the store's server holds the key.
inline std::string dead_mark_prefix() { return std::string(local::kFtStoreRoot) + "/dead/"; }
// ft::kRefusedMark: how a refused joiner's dead mark begins (other dead marks say why a
// member is gone: its heartbeat stopped, its process ended).
inline constexpr char kRefusedMarkText[] = "refused: ";

// ft::keys::kStopped under ft::keys::kRoot: why the job's members stopped it (a step that
// keeps failing, too few members left, forming given up; first wins, never removed). Once it
// is there no replacement can join: a joiner started then ends "the job it waited to join
// stopped", and replacing it again only spends --max_replacements (and --replace_after_s
// each time) before the job ends. The launcher asks for it with the refusals (job_store.h).
inline std::string job_stopped_key() { return std::string(local::kFtStoreRoot) + "/stopped"; }

struct RefusedMember {
  std::string id;   // its member id: "rank<R>+<n>" for this launcher's n-th replacement of R
  std::string why;  // the mark without kRefusedMarkText
};

// The refusal that a key created in the job's store says, if it is one: `key` as the server
// holds it, `value` the dead mark.
inline std::optional<RefusedMember> refusal_of(const std::string& key, const std::string& value) {
  const std::string prefix = dead_mark_prefix();
  if (key.compare(0, prefix.size(), prefix) != 0 || key.size() == prefix.size()) return std::nullopt;
  if (value.compare(0, sizeof(kRefusedMarkText) - 1, kRefusedMarkText) != 0) return std::nullopt;
  return RefusedMember{key.substr(prefix.size()), value.substr(sizeof(kRefusedMarkText) - 1)};
}

// The member id a rank's process has in a fault-tolerant job, unless its program names
// another (ManagerOptions::member_id): "rank<R>" for the first (ft::Manager's default from
// RANK), "rank<R>+<n>" for its n-th replacement (replacement_environment).
inline std::string member_id_of(int rank, int replacement_number) {
  return "rank" + std::to_string(rank) +
         (replacement_number > 0 ? "+" + std::to_string(replacement_number) : std::string());
}

}  // namespace launch
}  // namespace distcomm
