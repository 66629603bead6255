#include "backends/gloo/gloo_failure.h"

#include <future>
#include <optional>
#include <thread>

#include <gloo/common/error.h>
#include <gloo/common/logging.h>

#include "api/errors.h"

namespace distcomm {
namespace gloo_backend {
namespace {

// Where a failing rank leaves its reason, in the group's (already prefixed) store.
const char kReasonKey[] = "gloo/failure";

// How long a rank whose connection was cut looks for the reason, and how long the failing
// rank waits for its reason to be stored before it cuts the connections.
constexpr std::chrono::milliseconds kLookupWindow{1000};
constexpr std::chrono::milliseconds kPublishWait{500};

// Runs fn on its own thread and waits at most `limit` for it. A store can block much longer
// than that (a TCPStore whose server died retries its connection until the store timeout),
// and a failing group must not turn into a hang: a call still running after `limit` is
// abandoned (its thread holds what it needs and ends when the store gives up).
template <typename R>
std::optional<R> call_with_limit(std::function<R()> fn, std::chrono::milliseconds limit) {
  std::packaged_task<R()> task(std::move(fn));
  std::future<R> result = task.get_future();
  std::thread(std::move(task)).detach();
  if (result.wait_for(limit) != std::future_status::ready) return std::nullopt;
  try {
    return result.get();
  } catch (...) {
    return std::nullopt;  // the store itself failed: there is no reason to be had
  }
}

std::string message_of(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const ::gloo::EnforceNotMet& x) {
    return x.what();
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}

char kind_code(int kind) { return static_cast<char>('0' + kind); }

}  // namespace

GroupFailure::GroupFailure(StorePtr store, int rank, std::function<void()> interrupt)
    : store_(std::move(store)), rank_(rank), interrupt_(std::move(interrupt)) {}

std::exception_ptr GroupFailure::refusal() const {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string msg = shut_down_ && first_kind_ == Kind::kShutdown
                              ? "the group was shut down on this rank (ProcessGroup::abort or destruction)"
                              : "the group is unusable since an earlier failure; create a new group. "
                                "First failure: " + first_message_;
  switch (first_kind_) {
    case Kind::kTimeout: return std::make_exception_ptr(Timeout(msg));
    case Kind::kPeer: return std::make_exception_ptr(PeerFailure(msg));
    case Kind::kShutdown: return std::make_exception_ptr(PeerFailure(msg));
    case Kind::kOther: break;
  }
  return std::make_exception_ptr(Error(msg));
}

GroupFailure::Classified GroupFailure::classify(std::exception_ptr raw, std::chrono::milliseconds timeout) const {
  try {
    std::rethrow_exception(raw);
  } catch (const Timeout&) {
    return {Kind::kTimeout, raw};
  } catch (const PeerFailure&) {
    return {Kind::kPeer, raw};
  } catch (const Error&) {
    return {Kind::kOther, raw};
  } catch (const ::gloo::IoException& e) {
    const std::string msg = e.what();
    if (msg.find("Timed out") != std::string::npos) {
      return {Kind::kTimeout,
              std::make_exception_ptr(Timeout(
                  "timed out after " + std::to_string(timeout.count()) +
                  " ms waiting for peers: not every rank of the group joined this op in time, or one is "
                  "stuck (gloo: " + msg + ")"))};
    }
    return explain_peer_loss(msg);
  } catch (...) {
    return {Kind::kOther, std::make_exception_ptr(Error("gloo failed: " + message_of(raw)))};
  }
}

GroupFailure::Classified GroupFailure::explain_peer_loss(const std::string& gloo_message) const {
  const auto deadline = std::chrono::steady_clock::now() + kLookupWindow;
  std::optional<std::string> reason;
  StorePtr store = store_;
  while (!reason && std::chrono::steady_clock::now() < deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    auto found = call_with_limit<std::string>(
        [store] { return store->check({kReasonKey}) ? to_string(store->get(kReasonKey)) : std::string(); }, left);
    if (!found) break;  // the store does not answer (its server may be the rank that died)
    if (!found->empty()) reason = *found;
    else std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // The stored reason reads "<kind>\n<rank>\n<message>" (see publish()).
  if (reason && reason->size() > 2) {
    const size_t rank_end = reason->find('\n', 2);
    const std::string who = "rank " + reason->substr(2, rank_end - 2);
    const std::string why = rank_end == std::string::npos ? "" : reason->substr(rank_end + 1);
    switch (static_cast<Kind>((*reason)[0] - '0')) {
      case Kind::kTimeout:
        return {Kind::kTimeout, std::make_exception_ptr(Timeout(
                                    who + " of the group timed out and closed its connections, which cut this op "
                                          "off. Its error: " + why))};
      case Kind::kShutdown:
        return {Kind::kPeer, std::make_exception_ptr(PeerFailure(
                                 who + " shut the group down (abort or destruction) while this op was in flight"))};
      default:
        return {Kind::kPeer, std::make_exception_ptr(PeerFailure(
                                 who + " failed and closed its connections, which cut this op off. Its error: " +
                                 why))};
    }
  }
  return {Kind::kPeer, std::make_exception_ptr(PeerFailure(
                           "lost the connection to a peer: its process may have died or closed the group (gloo: " +
                           gloo_message + ")"))};
}

void GroupFailure::publish(Kind kind, const std::string& message) const {
  const std::string value = std::string(1, kind_code(static_cast<int>(kind))) + "\n" + std::to_string(rank_) + "\n" +
                            message;
  StorePtr store = store_;
  // compare_set: only the first rank to fail leaves its reason; later ones would only
  // describe the cascade it started.
  call_with_limit<bool>(
      [store, value] {
        store->compare_set(kReasonKey, {}, to_bytes(value));
        return true;
      },
      kPublishWait);
}

std::exception_ptr GroupFailure::record(std::exception_ptr raw, const std::string& what,
                                        std::chrono::milliseconds timeout) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) {
      // Cut off by our own shutdown: say so rather than blame a peer.
      return std::make_exception_ptr(
          PeerFailure("the group was shut down on this rank (ProcessGroup::abort or destruction) while this op "
                      "was in flight"));
    }
  }
  if (failed()) return refusal();  // a consequence of the first failure, which says more
  Classified c = classify(raw, timeout);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_.load()) return c.error;  // another thread recorded first while we classified
    first_kind_ = c.kind;
    first_message_ = what + ": " + message_of(c.error);
    failed_.store(true, std::memory_order_release);
  }
  publish(c.kind, first_message_);
  interrupt_();
  return c.error;
}

void GroupFailure::shut_down(const std::function<bool()>& ops_in_flight) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shut_down_ = true;
    if (failed_.load()) return;  // already cut off, and the peers already told
    first_kind_ = Kind::kShutdown;
    first_message_ = "the group was shut down on this rank";
    failed_.store(true, std::memory_order_release);
  }
  if (!ops_in_flight()) return;  // a clean close: the peers see the connections end, nothing more
  publish(Kind::kShutdown, first_message_);
  interrupt_();
}

}  // namespace gloo_backend
}  // namespace distcomm
