#include "api/group/member_lists.h"

#include <exception>
#include <optional>
#include <sstream>
#include <utility>

#include "api/diagnostics/op_fingerprint.h"  // rank_list_text, ranks_text
#include "api/errors.h"
#include "api/group/cannot_take_part.h"
#include "api/store/internal/call_deadline.h"

namespace distcomm {
namespace {

// The list as posted: every rank spelled out, not rank_list_text's ranges, so that ranks of
// releases before those ranges compare the same text; messages show it as display_list.
std::string wire_list(const std::vector<int>& list) {
  std::string s;
  for (int r : list) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return "[" + s + "]";
}

// A posted list as messages write it (rank_list_text: ranges in a long one); the text as
// posted where it does not read back as a list.
std::string display_list(const std::string& wire) {
  if (wire.size() < 2 || wire.front() != '[' || wire.back() != ']') return wire;
  std::vector<int> ranks;
  std::istringstream in(wire.substr(1, wire.size() - 2));
  for (std::string item; std::getline(in, item, ',');) {
    try {
      size_t used = 0;
      ranks.push_back(std::stoi(item, &used));
      if (item.find_first_not_of(' ', used) != std::string::npos) return wire;
    } catch (const std::exception&) {
      return wire;
    }
  }
  return rank_list_text(ranks);
}

// A post is "<number> <list>\t<backend>": the number is the leader's count of the creation
// (0 from the other ranks), the list as "[0, 1, 2]" with every rank (wire_list), the backend as the rank
// passed it ("" for the parent's); a refused list's is followed by a line saying why
// ("...\n<why>"), and a rank that cannot take part at all (its parent aborted there: fail)
// writes that line as cannot_take_part_text, so that its members report a peer's failure,
// not a mistake in their arguments.
std::string post_value(int64_t number, const std::vector<int>& list, const std::string& backend,
                       const std::string& refusal) {
  return std::to_string(number) + " " + wire_list(list) + "\t" + backend + (refusal.empty() ? "" : "\n" + refusal);
}
int64_t number_of(const std::string& value) { return std::stoll(value.substr(0, value.find(' '))); }
std::string list_of(const std::string& value) {
  const size_t from = value.find(' ') + 1;
  return value.substr(from, value.find('\t') - from);
}
std::string backend_of(const std::string& value) {
  const size_t from = value.find('\t') + 1;
  return value.substr(from, value.find('\n') - from);  // npos - from: to the end
}
std::string refusal_of(const std::string& value) {
  const size_t at = value.find('\n');
  return at == std::string::npos ? "" : value.substr(at + 1);
}


}  // namespace

MemberLists::MemberLists(std::string call, std::string key_prefix, std::vector<int> list, int parent_rank,
                         std::string backend, RaiseIfFailed raise_if_parent_failed)
    : call_(std::move(call)),
      key_prefix_(std::move(key_prefix)),
      list_(std::move(list)),
      parent_rank_(parent_rank),
      backend_(std::move(backend)),
      raise_if_parent_failed_(std::move(raise_if_parent_failed)) {}

std::string MemberLists::key(int parent_rank) const { return key_prefix_ + std::to_string(parent_rank); }

void MemberLists::post(Store& store) const { post(store, 0); }

void MemberLists::refuse(Store& store, const std::string& why) const { post(store, 0, why); }

void MemberLists::fail(Store& store, const std::string& why) const { post(store, 0, cannot_take_part_text(why)); }

void MemberLists::post(Store& store, int64_t number, const std::string& refusal) const {
  store.set(key(parent_rank_), post_value(number, list_, backend_, refusal));
}

int64_t MemberLists::meet(Store& store, const std::string& base, int rank, const InitWait& w,
                          const std::string& store_text) const {
  // The leader numbers the creation before it posts; the others read the number there once
  // every member has posted. (Calls that wait for nobody: bounded as a creation's count.)
  {
    internal::StoreCallDeadline bounded(w.store_calls_deadline(), "the creation of " + w.where);
    post(store, rank == 0 ? store.add(base + "/made_by/0", 1) : 0);
  }
  std::vector<std::string> keys;
  std::vector<int> ranks;
  for (size_t i = 0; i < list_.size(); ++i) {
    keys.push_back(key(list_[i]));
    ranks.push_back(static_cast<int>(i));
  }
  std::vector<std::string> values(list_.size());  // what each member posted, once seen
  wait_for_arrivals(store, keys, ranks, w, store_text, [&] {
    // One request for every list not seen yet (read_present), not a check and a get each.
    std::vector<std::string> unseen;
    std::vector<size_t> at;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!values[i].empty()) continue;
      unseen.push_back(keys[i]);
      at.push_back(i);
    }
    if (unseen.empty()) return;
    const std::vector<std::optional<Store::Bytes>> got = read_present(store, unseen);
    for (size_t j = 0; j < got.size(); ++j) {
      if (got[j]) values[at[j]].assign(got[j]->begin(), got[j]->end());
    }
    check(values);
    // Members still to come: is one of them known gone (the parent's failure record)?
    // Asked as the parent's host exchange asks it, once per look (kCreationFailedCheck).
    if (!raise_if_parent_failed_) return;
    std::vector<int> missing;
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i].empty()) missing.push_back(list_[i]);
    }
    if (missing.empty()) return;
    try {
      raise_if_parent_failed_([&] { return missing; });
    } catch (const internal::StoreCallCutShort&) {
      throw;  // the store did not answer: wait_until says so (with_context would lose the type)
    } catch (const Error&) {
      std::rethrow_exception(with_context(std::current_exception(), call_));
    }
  });
  return number_of(values.front());
}

void MemberLists::check(const std::vector<std::string>& values) const {
  // A member that refused its own list first: its refusal is the cause, and says why.
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string why = values[i].empty() ? "" : refusal_of(values[i]);
    if (why.empty()) continue;
    if (says_cannot_take_part(why)) throw cannot_take_part_failure(call_, list_[i], why);
    throw InvalidArgument(call_ + ": rank " + std::to_string(list_[i]) + " passed " + display_list(list_of(values[i])) +
                          ", which it refused: " + why);
  }
  const std::string mine = wire_list(list_);
  bool differs = false;
  for (const std::string& v : values) differs = differs || (!v.empty() && list_of(v) != mine);
  if (!differs) {
    // The same list, each member's group would be made with the backend it passed: ranks
    // that passed different ones would wait in different rendezvous until the timeout.
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i].empty() || backend_of(values[i]) == backend_) continue;
      throw InvalidArgument(call_ + ": rank " + std::to_string(parent_rank_) + " passed backend '" + backend_ +
                            "', rank " + std::to_string(list_[i]) + " passed '" + backend_of(values[i]) + "' (both for " +
                            rank_list_text(list_) + "); every rank must pass the same backend");
    }
    return;
  }
  // Who passed which list, this rank's list first (the member at values[i] is list_[i]).
  std::vector<std::pair<std::string, std::vector<int>>> passed{{mine, {}}};
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].empty()) continue;
    const std::string list = list_of(values[i]);
    auto it = passed.begin();
    while (it != passed.end() && it->first != list) ++it;
    if (it == passed.end()) it = passed.insert(passed.end(), {list, {}});
    it->second.push_back(list_[i]);
  }
  std::string who;
  for (const auto& [list, ranks] : passed) {
    who += (who.empty() ? "" : ", ") + ranks_text(ranks) + " passed " + display_list(list);
  }
  throw InvalidArgument(call_ + ": " + who + "; every rank must pass the same list");
}

}  // namespace distcomm
