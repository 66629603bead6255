#include "api/group/host_exchange.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

#include "api/diagnostics/duration_text.h"
#include "api/diagnostics/stall_watch.h"  // kDefaultStallReportInterval
#include "api/errors.h"
#include "api/group/cannot_take_part.h"
#include "api/group/environment.h"
#include "api/group/init_wait.h"
#include "api/group/sliced_store_wait.h"
#include "api/logging.h"
#include "api/store/internal/store_host.h"
#include "api/diagnostics/op_fingerprint.h"

namespace distcomm {

HostExchange::~HostExchange() = default;

namespace {

// A message is its call's purpose, a NUL, then the caller's bytes (a purpose never holds a
// NUL: it is the program's text about a call).
std::string framed(const std::string& purpose, const std::string& mine) {
  std::string out;
  out.reserve(purpose.size() + 1 + mine.size());
  out.append(purpose).push_back('\0');
  out.append(mine);
  return out;
}

std::string purpose_text(const std::string& purpose) { return purpose.empty() ? "(no purpose named)" : purpose; }

// The callers' bytes of `messages`; a Desync when a rank's purpose is not `purpose`.
std::vector<std::string> unframed(std::vector<std::string> messages, const std::string& purpose,
                                  const std::string& where, uint64_t call) {
  // A rank that posted that it cannot take part (post_cannot_take_part) is the cause,
  // whatever the others posted.
  for (size_t r = 0; r < messages.size(); ++r) {
    if (says_cannot_take_part(messages[r])) {
      throw cannot_take_part_failure(where + " host message exchange #" + std::to_string(call), static_cast<int>(r),
                                     messages[r]);
    }
  }
  std::vector<std::string> purposes;
  bool differ = false;
  for (std::string& m : messages) {
    const size_t end = m.find('\0');
    purposes.push_back(end == std::string::npos ? m : m.substr(0, end));
    differ |= purposes.back() != purpose;
    m.erase(0, end == std::string::npos ? m.size() : end + 1);
  }
  if (!differ) return messages;
  std::string text;
  for (size_t r = 0; r < purposes.size(); ++r) {
    text += (r ? "; rank " : "rank ") + std::to_string(r) + ": " + purpose_text(purposes[r]);
  }
  throw Desync(where + " host message exchange #" + std::to_string(call) +
               ": the ranks' calls pair up but are not the same call (" + text +
               "): every rank must make the same host exchanges (ordered_print, split, DDP's logging, ...) in the "
               "same order");
}

void check_root(const HostExchangeOptions& options, int root) {
  if (root < 0 || root >= options.size) {
    throw InvalidArgument(options.where + ": host exchange gather: root " + std::to_string(root) +
                          " is outside [0, " + std::to_string(options.size) + ")");
  }
}

class StoreExchange final : public HostExchange {
 public:
  StoreExchange(const HostExchangeOptions& options, StorePtr store, std::string key_prefix)
      : options_(options), store_(std::move(store)), prefix_(std::move(key_prefix)) {}

  const std::string& where() const override { return options_.where; }
  uint64_t next_call() const override { return calls_.load(); }

  std::vector<std::string> all_gather_messages(const std::string& mine) override {
    const uint64_t call = calls_++;
    std::vector<std::string> out = exchange(call, mine, /*read=*/true);
    // Every rank has posted this call, so every rank is done reading the earlier ones.
    std::vector<std::string> stale;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stale.swap(stale_);
      stale_.push_back(key(call, options_.rank));
      last_all_gather_ = static_cast<int64_t>(call);
    }
    for (const std::string& k : stale) store_->delete_key(k);
    return out;
  }

  std::vector<std::string> gather_messages(const std::string& mine, int root) override {
    check_root(options_, root);
    const uint64_t call = calls_++;
    if (options_.rank != root) {
      exchange(call, mine, /*read=*/false);  // the root deletes it once read
      return {};
    }
    std::vector<std::string> out = exchange(call, mine, /*read=*/true);
    for (int r = 0; r < options_.size; ++r) store_->delete_key(key(call, r));
    return out;
  }

 private:
  std::string key(uint64_t call, int rank) const {
    return prefix_ + std::to_string(call) + "/" + std::to_string(rank);
  }

  // Posts mine; with read, waits for every rank's message and returns them in rank order.
  std::vector<std::string> exchange(uint64_t call, const std::string& mine, bool read) {
    const std::string what = options_.where + " host message exchange #" + std::to_string(call);
    try {
      store_->set(key(call, options_.rank), mine);
      if (!read) return {};
      std::vector<std::string> keys;
      for (int r = 0; r < options_.size; ++r) keys.push_back(key(call, r));
      wait_naming_missing(keys, call, what);
      std::vector<std::string> out;
      for (const std::string& k : keys) out.push_back(store_->get_string(k));
      return out;
    } catch (const Error&) {
      std::rethrow_exception(with_context(std::current_exception(), what));
    }
  }

  void wait_naming_missing(const std::vector<std::string>& keys, uint64_t call, const std::string& what) {
    // A call made while a group is being created (the auto backend's placements,
    // GroupCreation::make_backends) waits as the creation's other phases do: within its
    // deadline, logging whom it waits for, and ending as soon as another rank's part of it
    // has failed (its failure key: ft's liveness monitor writes it for a member that died
    // after it arrived). With the group's op timeout alone, the survivors of a rank killed
    // between its arrival and its post waited that whole timeout (30 minutes) in silence.
    if (const InitWait* creating = BackendCreationScope::current()) {
      std::vector<int> ranks;
      for (int r = 0; r < options_.size; ++r) ranks.push_back(r);
      wait_for_keys(*store_, keys, ranks, *creating, "to post host message exchange #" + std::to_string(call),
                    "they have not reached this call, or are stuck or gone");
      return;
    }
    try {
      // In slices, with the store's connection free between them (SlicedStoreWait): the
      // process's other users of that connection -- the backend's watch that publishes a
      // dead peer, the stall watch -- would otherwise wait behind this wait, and a rank gone
      // meanwhile would never be recorded. And every kGroupFailureCheck, whether the group
      // has learnt that a rank it waits for is gone.
      using Clock = std::chrono::steady_clock;
      const Clock::time_point start = Clock::now();
      // A wait of the group's timeout (30 minutes by default) says every stall report
      // interval whom it waits for, as an op's does: a peer stuck or stopped before this
      // call (split, DDP's construction, a rank-ordered print) is not a silent hang.
      const std::chrono::milliseconds report_every = stall_report_interval(kDefaultStallReportInterval);
      Clock::time_point next_report = start + report_every;
      SlicedStoreWait wait(*store_, keys, what + " posts");
      wait.look_every(kGroupFailureCheck, [&] {
        if (Clock::now() >= next_report) {
          log_line("distcomm: " + what + " has waited " + seconds_text(wait.waited()) + " of its timeout of " +
                   seconds_text(options_.timeout) + " for ranks " + rank_list_text(missing(keys)) +
                   " to post: they have not reached this call, or are stuck or gone");
          next_report = Clock::now() + report_every;
        }
        // The missing ranks are looked up only when the group has a failure to match them
        // with: every waiting rank asks every 0.5 s, and a check per rank each time would
        // be thousands of requests a second to the store's host at 96 ranks.
        if (options_.raise_if_group_failed) options_.raise_if_group_failed([&] { return missing(keys); });
      });
      wait.wait_by(start + options_.timeout);
    } catch (const StoreError& e) {
      std::rethrow_exception(internal::store_lost(e, what + ": the store failed (" + e.what() + ")", options_.store_host));
    } catch (const Timeout&) {
      throw Timeout(what + ": ranks " + rank_list_text(missing(keys)) + " did not post within " +
                    std::to_string(options_.timeout.count()) +
                    " ms: they have not reached this call, or are stuck or gone");
    }
  }

  // The ranks whose key is not in the store yet.
  std::vector<int> missing(const std::vector<std::string>& keys) {
    std::vector<int> ranks;
    for (int r = 0; r < options_.size; ++r) {
      if (!store_->check({keys[static_cast<size_t>(r)]})) ranks.push_back(r);
    }
    return ranks;
  }

  const HostExchangeOptions options_;
  const StorePtr store_;
  const std::string prefix_;
  std::atomic<uint64_t> calls_{0};
  mutable std::mutex mu_;
  std::vector<std::string> stale_;  // this rank's keys that every rank has read
  int64_t last_all_gather_ = -1;     // its keys stay until the next all_gather (or the group's end)

  friend std::vector<std::string> distcomm::store_exchange_keys_left(const HostExchange& exchange);
  friend void distcomm::post_cannot_take_part(HostExchange& exchange, const std::string& why);
};

class CollectiveExchange final : public HostExchange {
 public:
  CollectiveExchange(const HostExchangeOptions& options, AllGatherBytes all_gather)
      : options_(options), all_gather_(std::move(all_gather)) {}

  const std::string& where() const override { return options_.where; }
  uint64_t next_call() const override { return calls_.load(); }

  std::vector<std::string> all_gather_messages(const std::string& mine) override {
    ++calls_;
    return all_gather_strings(options_.size, mine, all_gather_);
  }

  // Collectives give no cheaper gather than an all_gather of small messages.
  std::vector<std::string> gather_messages(const std::string& mine, int root) override {
    check_root(options_, root);
    std::vector<std::string> all = all_gather_messages(mine);
    if (options_.rank != root) return {};
    return all;
  }

 private:
  const HostExchangeOptions options_;
  const AllGatherBytes all_gather_;
  std::atomic<uint64_t> calls_{0};

  friend void distcomm::post_cannot_take_part(HostExchange& exchange, const std::string& why);
};

}  // namespace

std::vector<std::string> store_exchange_keys_left(const HostExchange& exchange) {
  const auto* store = dynamic_cast<const StoreExchange*>(&exchange);
  if (!store) return {};
  std::lock_guard<std::mutex> lock(store->mu_);
  std::vector<std::string> keys;
  if (store->last_all_gather_ < 0) return keys;
  for (int r = 0; r < store->options_.size; ++r) {
    keys.push_back(store->key(static_cast<uint64_t>(store->last_all_gather_), r));
  }
  return keys;
}

void post_cannot_take_part(HostExchange& exchange, const std::string& why) {
  if (auto* collective = dynamic_cast<CollectiveExchange*>(&exchange)) {
    ++collective->calls_;
    return;
  }
  auto* store = dynamic_cast<StoreExchange*>(&exchange);
  if (!store) return;
  const uint64_t call = store->calls_++;
  // Left in the store: the group it served was aborted and goes with its keys as it can.
  store->store_->set(store->key(call, store->options_.rank), cannot_take_part_text(why));
}

std::vector<std::string> HostExchange::all_gather(const std::string& mine, const std::string& purpose) {
  const uint64_t call = next_call();
  return unframed(all_gather_messages(framed(purpose, mine)), purpose, where(), call);
}

std::vector<std::string> HostExchange::gather(const std::string& mine, int root, const std::string& purpose) {
  const uint64_t call = next_call();
  std::vector<std::string> messages = gather_messages(framed(purpose, mine), root);
  if (messages.empty()) return messages;  // not the root
  return unframed(std::move(messages), purpose, where(), call);
}

std::vector<std::string> all_gather_for(HostExchange& exchange, const std::string& call, const std::string& mine) {
  try {
    return exchange.all_gather(mine, call);
  } catch (const Error&) {
    // "rank 0/3 group 'world' host message exchange #2: ..." says where, not which call of
    // the program's waited there.
    std::rethrow_exception(with_context(std::current_exception(), call));
  }
}

void agree_on_arguments(HostExchange& exchange, const std::string& call, const std::string& error,
                        const std::string& arguments) {
  // A digest, not the text: arguments that grow with the group (split_group's lists) would
  // otherwise cost every rank the whole group's texts, N^2 through the store. The texts
  // travel in a second round only when the digests differ, to be named.
  const std::string digest = std::to_string(std::hash<std::string>{}(arguments));
  const auto all = all_gather_for(exchange, call, error.empty() ? "ok " + digest : "bad " + error);
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].compare(0, 4, "bad ") == 0) {
      // Where every rank found the same fault (the usual case: one program), say so.
      const bool everyone = std::all_of(all.begin(), all.end(), [&](const std::string& s) { return s == all[r]; });
      throw InvalidArgument(call + ": " + (everyone ? std::string("every rank") : "rank " + std::to_string(r)) +
                            " gave bad arguments: " + all[r].substr(4));
    }
  }
  const auto differs = std::find_if(all.begin(), all.end(), [&](const std::string& s) { return s != all.front(); });
  if (differs == all.end()) return;
  const auto texts = all_gather_for(exchange, call, arguments);  // every rank saw the difference: all take this round
  const size_t r = static_cast<size_t>(differs - all.begin());
  throw InvalidArgument(call + ": rank " + std::to_string(r) + " gave " + texts[r] + " but rank 0 gave " +
                        texts.front() + ": every rank must pass the same");
}

std::unique_ptr<HostExchange> make_store_exchange(const HostExchangeOptions& options, StorePtr store,
                                                  std::string key_prefix) {
  if (!store) throw InvalidArgument(options.where + ": a store exchange needs a store");
  return std::make_unique<StoreExchange>(options, std::move(store), std::move(key_prefix));
}

std::vector<std::string> all_gather_strings(int size, const std::string& mine, const AllGatherBytes& all_gather) {
  Tensor length = Tensor::of<int64_t>({static_cast<int64_t>(mine.size())});
  Tensor lengths = Tensor::empty({size}, DType::kInt64);
  all_gather(lengths, length);
  const int64_t* length_of = lengths.data_as<int64_t>();
  const int64_t longest = *std::max_element(length_of, length_of + size);
  if (longest == 0) return std::vector<std::string>(static_cast<size_t>(size));
  // Zeros past this rank's bytes: no stale memory leaves the process.
  Tensor padded = Tensor::zeros({longest}, DType::kUInt8);
  if (!mine.empty()) std::memcpy(padded.data(), mine.data(), mine.size());
  Tensor all = Tensor::empty({longest * size}, DType::kUInt8);
  all_gather(all, padded);
  const char* bytes = static_cast<const char*>(all.data());
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) out.emplace_back(bytes + r * longest, static_cast<size_t>(length_of[r]));
  return out;
}

std::unique_ptr<HostExchange> make_collective_exchange(const HostExchangeOptions& options,
                                                       AllGatherBytes all_gather) {
  return std::make_unique<CollectiveExchange>(options, std::move(all_gather));
}

}  // namespace distcomm
