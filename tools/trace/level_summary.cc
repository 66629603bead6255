#include "tools/trace/level_summary.h"

#include <algorithm>
#include <cctype>

#include "api/diagnostics/op_fingerprint.h"

namespace distcomm {
namespace trace {
namespace {

// "0, 2-4, 7" -> {0, 2, 3, 4, 7}; what does not parse is skipped.
std::set<int> parse_rank_list(const std::string& inside) {
  std::set<int> ranks;
  size_t at = 0;
  while (at < inside.size()) {
    size_t end = inside.find(',', at);
    if (end == std::string::npos) end = inside.size();
    const std::string item = inside.substr(at, end - at);
    at = end + 1;
    const size_t digit = item.find_first_of("0123456789");
    if (digit == std::string::npos) continue;
    const size_t dash = item.find('-', digit);
    try {
      const int first = std::stoi(item.substr(digit));
      const int last = dash == std::string::npos ? first : std::stoi(item.substr(dash + 1));
      for (int r = first; r <= last && last - first < 100000; ++r) ranks.insert(r);
    } catch (const std::exception&) {
    }
  }
  return ranks;
}

// `digits` (digits only) as a rank or host number; false past 9 digits, where std::stoi
// would throw out of analyze and one odd error text would lose the whole report.
bool small_number(const std::string& digits, int* out) {
  if (digits.empty() || digits.size() > 9) return false;
  *out = std::stoi(digits);
  return true;
}

// Whether `rest` is `prefix` followed by digits only ("hier_local3").
bool is_level(const std::string& rest, const std::string& prefix) {
  return rest.size() > prefix.size() && rest.compare(0, prefix.size(), prefix) == 0 &&
         std::all_of(rest.begin() + static_cast<long>(prefix.size()), rest.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
}

std::string ranks_text(const std::set<int>& ranks) {
  const std::vector<int> list(ranks.begin(), ranks.end());
  return list.size() == 1 ? "rank " + std::to_string(list[0]) : "ranks " + rank_list_text(list);
}

// "'world/hier_local0', 'world/hier_local1'", the first few of many.
std::string names_text(const std::set<std::string>& names) {
  std::string s;
  size_t shown = 0;
  for (const std::string& n : names) {
    if (shown == 4) return s + " and " + std::to_string(names.size() - shown) + " more";
    s += (shown++ ? ", '" : "'") + n + "'";
  }
  return s;
}

}  // namespace

std::set<int> silent_ranks_in(const std::string& error) {
  std::set<int> silent;
  const std::string mark = " did not report";
  for (size_t pos = error.find(mark); pos != std::string::npos; pos = error.find(mark, pos + 1)) {
    const std::string before = error.substr(0, pos);
    if (!before.empty() && before.back() == ']') {
      const size_t open = before.rfind('[');
      if (open == std::string::npos || open < 6 || before.compare(open - 6, 6, "ranks ") != 0) continue;
      const std::set<int> listed = parse_rank_list(before.substr(open + 1, before.size() - open - 2));
      silent.insert(listed.begin(), listed.end());
      continue;
    }
    size_t digits = before.size();
    while (digits > 0 && std::isdigit(static_cast<unsigned char>(before[digits - 1]))) --digits;
    if (digits == before.size() || digits < 5 || before.compare(digits - 5, 5, "rank ") != 0) continue;
    int rank = 0;
    if (small_number(before.substr(digits), &rank)) silent.insert(rank);
  }
  return silent;
}

std::string levels_summary(const std::string& name, const std::map<std::string, GroupVerdict>& verdicts) {
  const auto parent_it = verdicts.find(name);
  if (parent_it == verdicts.end() || !parent_it->second.stuck) return "";
  const GroupVerdict& parent = parent_it->second;
  // Ranks without a dump (dead, or their host gone) are the cause the section names: the
  // levels' laggards are then ranks held up by them, and naming them sent readers astray.
  if (parent.ranks_missing) return "";
  // The group's rank of a world rank (-1: not in it); a dump without the map is the world.
  auto group_rank = [&](int64_t world) -> int {
    if (parent.global_ranks.empty()) return static_cast<int>(world);
    const auto it = std::find(parent.global_ranks.begin(), parent.global_ranks.end(), world);
    return it == parent.global_ranks.end() ? -1 : static_cast<int>(it - parent.global_ranks.begin());
  };
  std::map<int, std::set<std::string>> behind, silent;  // group rank -> the groups that say so
  std::map<int, std::set<int>> hosts;                    // host number -> its ranks, in the group's
  for (const auto& [level, v] : verdicts) {
    if (level.size() <= name.size() + 1 || level.compare(0, name.size() + 1, name + "/") != 0) continue;
    const std::string rest = level.substr(name.size() + 1);
    const bool host = is_level(rest, "hier_host");
    if (!host && !is_level(rest, "hier_local")) continue;
    auto to_group = [&](int r) {
      return static_cast<size_t>(r) < v.global_ranks.size() ? group_rank(v.global_ranks[static_cast<size_t>(r)]) : -1;
    };
    int host_number = 0;
    if (host && !small_number(rest.substr(9), &host_number)) continue;
    if (host) {
      std::set<int>& ranks = hosts[host_number];
      for (size_t r = 0; r < v.global_ranks.size(); ++r) ranks.insert(to_group(static_cast<int>(r)));
    }
    if (!v.stuck) continue;
    for (int r : v.behind) {
      if (to_group(r) >= 0) behind[to_group(r)].insert(level);
    }
    for (int r : v.silent) {
      if (to_group(r) >= 0) silent[to_group(r)].insert(level);
    }
  }
  for (int r : parent.silent) silent[r].insert(name);
  for (int r : parent.behind) {  // the group's section already names these
    behind.erase(r);
    silent.erase(r);
  }
  for (const auto& [r, names] : behind) silent.erase(r);
  // "ranks [8-11] (every rank of host 2)", with world ranks where the group's differ.
  auto who = [&](const std::map<int, std::set<std::string>>& by_rank, std::set<std::string>* seen_by) {
    std::set<int> ranks;
    for (const auto& [r, names] : by_rank) {
      ranks.insert(r);
      seen_by->insert(names.begin(), names.end());
    }
    std::string s = ranks_text(ranks);
    std::set<int64_t> world;
    for (int r : ranks) {
      if (static_cast<size_t>(r) < parent.global_ranks.size()) world.insert(parent.global_ranks[static_cast<size_t>(r)]);
    }
    if (!world.empty() && !std::equal(world.begin(), world.end(), ranks.begin(), ranks.end())) {
      std::set<int> w(world.begin(), world.end());
      s += " (world " + ranks_text(w) + ")";
    }
    std::vector<std::string> where;
    for (const auto& [h, members] : hosts) {
      const size_t in = static_cast<size_t>(std::count_if(members.begin(), members.end(), [&](int r) { return ranks.count(r) > 0; }));
      if (in == 0) continue;
      where.push_back((in == members.size() ? "all of host " : std::to_string(in) + " of host ") + std::to_string(h) +
                      ": group '" + name + "/hier_host" + std::to_string(h) + "'");
    }
    if (!where.empty()) {
      s += " (";
      for (size_t i = 0; i < where.size(); ++i) s += (i ? "; " : "") + where[i];
      s += ")";
    }
    return s;
  };
  const std::string verdict = "likely the cause";
  std::string out;
  if (!behind.empty()) {
    std::set<std::string> seen_by;
    const std::string ranks = who(behind, &seen_by);
    out += "    behind, as the group's levels show: " + ranks + " never took part in its levels' ops of " + parent.what +
           ", as seen by " + names_text(seen_by) + " (each in its own ranks above): " + verdict + "\n";
  }
  if (!silent.empty()) {
    std::set<std::string> seen_by;
    const std::string ranks = who(silent, &seen_by);
    out += "    did not report while the others waited in " + parent.what + ": " + ranks + ", per the errors in " +
           names_text(seen_by) + " (frozen, cut off from the others and the store, or gone): " + verdict + "\n";
  }
  return out;
}

}  // namespace trace
}  // namespace distcomm
