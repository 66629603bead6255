#include "ddp/replica_check.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "api/errors.h"
#include "ddp/message_format.h"

namespace distcomm {
namespace ddp {
namespace {

constexpr size_t kMaxReported = 5;  // differing entries named in one message

// Length-prefixed fields, so names may hold any byte: the problems, the number of options,
// each option's name and value, the flags (one character each) and their names, then the
// entries.
std::string encode(const ReplicaDescription& d) {
  std::string out;
  auto field = [&](const std::string& s) { out += std::to_string(s.size()) + ":" + s; };
  field(d.local_problems);
  field(std::to_string(d.options.size()));
  for (const auto& option : d.options) {
    field(option.first);
    field(option.second);
  }
  field(d.flags);
  for (const std::string& name : d.flag_names) field(name);
  for (const std::string& e : d.entries) field(e);
  return out;
}

ReplicaDescription decode(const std::string& text) {
  std::vector<std::string> fields;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t colon = text.find(':', pos);
    if (colon == std::string::npos) throw Error("DDP replica check: corrupt description");
    const size_t len = std::stoul(text.substr(pos, colon - pos));
    fields.push_back(text.substr(colon + 1, len));
    pos = colon + 1 + len;
  }
  ReplicaDescription d;
  if (fields.size() < 2) throw Error("DDP replica check: truncated description");
  d.local_problems = fields[0];
  const size_t options = std::stoul(fields[1]);
  if (fields.size() < 2 + 2 * options) throw Error("DDP replica check: truncated options");
  for (size_t k = 0; k < options; ++k) d.options.emplace_back(fields[2 + 2 * k], fields[3 + 2 * k]);
  size_t next = 2 + 2 * options;
  if (fields.size() < next + 1) throw Error("DDP replica check: truncated flags");
  d.flags = fields[next++];
  if (fields.size() < next + d.flags.size()) throw Error("DDP replica check: truncated flag names");
  d.flag_names.assign(fields.begin() + next, fields.begin() + next + d.flags.size());
  next += d.flags.size();
  d.entries.assign(fields.begin() + next, fields.end());
  return d;
}

// Ranks grouped by the value they hold, values in order of first appearance.
std::vector<std::pair<std::string, std::vector<int>>> group_by_value(const std::vector<std::string>& per_rank) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (size_t r = 0; r < per_rank.size(); ++r) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == per_rank[r]; });
    if (it == groups.end()) it = groups.insert(groups.end(), {per_rank[r], {}});
    it->second.push_back(static_cast<int>(r));
  }
  return groups;
}

// "A on ranks 0, 2; B on rank 1"
std::string who_has_what(const std::vector<std::pair<std::string, std::vector<int>>>& groups) {
  std::string s;
  for (size_t i = 0; i < groups.size(); ++i) s += (i ? "; " : "") + groups[i].first + " on " + rank_list(groups[i].second);
  return s;
}

// Each option whose value differs, with the ranks holding each value ("" when all agree).
std::string option_mismatch(const std::vector<ReplicaDescription>& ranks) {
  std::vector<std::string> names;  // in the order the ranks sent them
  for (const ReplicaDescription& d : ranks) {
    for (const auto& option : d.options) {
      if (std::find(names.begin(), names.end(), option.first) == names.end()) names.push_back(option.first);
    }
  }
  std::string diff;
  for (const std::string& name : names) {
    std::vector<std::string> values;
    for (const ReplicaDescription& d : ranks) {
      auto it = std::find_if(d.options.begin(), d.options.end(), [&](const auto& o) { return o.first == name; });
      values.push_back(it == d.options.end() ? "not sent (another DDP version)" : it->second);
    }
    const auto groups = group_by_value(values);
    if (groups.size() == 1) continue;
    diff += (diff.empty() ? "" : ". ") + name + " differs between ranks: " + who_has_what(groups);
  }
  if (diff.empty()) return diff;
  // These options decide which collectives DDP issues, their sizes and order: a difference
  // would surface later as a Desync naming DDP's internal ops, or a hang.
  return diff + ". Every rank must pass the same DdpOptions (all but gradient_as_bucket_view; "
                "see DdpOptions in ddp/distributed_data_parallel.h)";
}

// The tensors that differ (count, then each entry), with the ranks ("" when all agree).
std::string entry_mismatch(const std::vector<ReplicaDescription>& ranks) {
  std::string diff;
  std::vector<std::string> counts;
  size_t longest = 0;
  for (const ReplicaDescription& d : ranks) {
    counts.push_back(std::to_string(d.entries.size()));
    longest = std::max(longest, d.entries.size());
  }
  const auto count_groups = group_by_value(counts);
  if (count_groups.size() > 1) diff = "the ranks hold different numbers of tensors: " + who_has_what(count_groups);
  // Past a rank's last entry it holds "no tensor", so an extra (or missing) parameter is
  // named by the entries themselves, which every rank already sent.
  size_t reported = 0, differing = 0;
  for (size_t i = 0; i < longest; ++i) {
    std::vector<std::string> entry;
    for (const ReplicaDescription& d : ranks) entry.push_back(i < d.entries.size() ? d.entries[i] : "no tensor");
    const auto groups = group_by_value(entry);
    if (groups.size() == 1) continue;  // all ranks agree
    ++differing;
    if (reported++ < kMaxReported) {
      diff += (diff.empty() ? "" : "; ") + std::string("entry ") + std::to_string(i) + ": " + who_has_what(groups);
    }
  }
  if (differing > kMaxReported) diff += "; and " + std::to_string(differing - kMaxReported) + " more differing entries";
  if (diff.empty()) return diff;
  return diff + ". Every rank must wrap the same parameters and buffers (names, dtypes, shapes, order); build the "
                "model identically on every rank";
}

}  // namespace

std::string describe_replica_mismatch(const std::vector<ReplicaDescription>& ranks) {
  // A rank's own problems first: they say what is wrong and what was expected, and its
  // entries are not known.
  std::string problems;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (!ranks[r].local_problems.empty()) {
      problems += (problems.empty() ? "" : "; ") + std::string("on rank ") + std::to_string(r) + ": " +
                  ranks[r].local_problems;
    }
  }
  if (!problems.empty()) return "invalid arguments " + problems;
  // Each part carries the advice that fits it.
  const std::string options = option_mismatch(ranks), entries = entry_mismatch(ranks);
  return options + (options.empty() || entries.empty() ? "" : ". ") + entries;
}

void verify_replicas(ProcessGroup& pg, const ReplicaDescription& mine, const ReplicaCheck& first) {
  if (mine.flags.size() != mine.flag_names.size()) throw Error("DDP replica check: a flag without its name");
  std::vector<ReplicaDescription> ranks;
  for (const std::string& text : pg.exchange().all_gather(encode(mine), "DDP's replica check")) ranks.push_back(decode(text));
  std::string mismatch = first ? first(ranks) : std::string();
  if (mismatch.empty()) mismatch = describe_replica_mismatch(ranks);
  if (!mismatch.empty()) {
    throw InvalidArgument("DistributedDataParallel (rank " + std::to_string(pg.rank()) + "/" +
                          std::to_string(pg.size()) + ", group '" + pg.name() + "'): " + mismatch + ".");
  }
}

}  // namespace ddp
}  // namespace distcomm

