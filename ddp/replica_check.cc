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

// Length-prefixed fields, so names may hold any byte.
std::string encode(const ReplicaDescription& d) {
  std::string out;
  auto field = [&](const std::string& s) { out += std::to_string(s.size()) + ":" + s; };
  field(d.local_problems);
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
  if (fields.empty()) throw Error("DDP replica check: empty description");
  d.local_problems = fields[0];
  d.entries.assign(fields.begin() + 1, fields.end());
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

}  // namespace

std::string describe_replica_mismatch(const std::vector<ReplicaDescription>& ranks) {
  std::string problems;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (!ranks[r].local_problems.empty()) {
      problems += (problems.empty() ? "" : "; ") + std::string("on rank ") + std::to_string(r) + ": " +
                  ranks[r].local_problems;
    }
  }
  if (!problems.empty()) return "invalid parameters " + problems;

  std::string diff;
  std::vector<std::string> counts;
  size_t common = SIZE_MAX;
  for (const ReplicaDescription& d : ranks) {
    counts.push_back(std::to_string(d.entries.size()));
    common = std::min(common, d.entries.size());
  }
  const auto count_groups = group_by_value(counts);
  if (count_groups.size() > 1) diff = "the ranks hold different numbers of tensors: " + who_has_what(count_groups);
  size_t reported = 0, differing = 0;
  for (size_t i = 0; i < common; ++i) {
    std::vector<std::string> entry;
    for (const ReplicaDescription& d : ranks) entry.push_back(d.entries[i]);
    const auto groups = group_by_value(entry);
    if (groups.size() == 1) continue;  // all ranks agree
    ++differing;
    if (reported++ < kMaxReported) {
      diff += (diff.empty() ? "" : "; ") + std::string("entry ") + std::to_string(i) + ": " + who_has_what(groups);
    }
  }
  if (differing > kMaxReported) diff += "; and " + std::to_string(differing - kMaxReported) + " more differing entries";
  return diff;
}

void verify_replicas(ProcessGroup& pg, const ReplicaDescription& mine) {
  std::vector<ReplicaDescription> ranks;
  for (const std::string& text : pg.exchange().all_gather(encode(mine))) ranks.push_back(decode(text));
  const std::string mismatch = describe_replica_mismatch(ranks);
  if (!mismatch.empty()) {
    throw InvalidArgument("DistributedDataParallel (rank " + std::to_string(pg.rank()) + "/" +
                          std::to_string(pg.size()) + ", group '" + pg.name() + "'): " + mismatch +
                          ". Every rank must wrap the same parameters (names, dtypes, shapes, order); "
                          "build the model identically on every rank.");
  }
}

}  // namespace ddp
}  // namespace distcomm

