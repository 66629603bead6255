#include "launch/round_watch.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "api/process/local_processes.h"
#include "launch/duration_text.h"
#include "launch/rendezvous_endpoint.h"

namespace distcomm {
namespace launch {
namespace {

// How often the watch looks: a failure elsewhere reaches this machine's ranks within it.
constexpr std::chrono::milliseconds kLookEvery{200};

}  // namespace

RoundWatch::RoundWatch(const Connect& connect, const ElasticOptions& options, int max_restarts, Round round,
                       std::string self_id, const LauncherLinks& links)
    : store_(connect([this] { return stop_.load(); })),
      options_(options),
      rendezvous_(*store_, options, max_restarts),
      liveness_(options.heartbeat_timeout),
      round_(std::move(round)),
      self_(std::move(self_id)),
      links_(links) {
  if (::pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw std::runtime_error(std::string("RoundWatch: pipe: ") + std::strerror(errno));
  }
  attempt_watch_.fd = pipe_[0];
  attempt_watch_.reason = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    return reason_;
  };
}

RoundWatch::~RoundWatch() {
  stop();
  ::close(pipe_[0]);
  ::close(pipe_[1]);
}

void RoundWatch::start() {
  thread_ = std::thread([this] {
    while (!stop_) {
      const std::string why = look();
      if (!why.empty()) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          reason_ = why;
        }
        const char byte = 1;
        ssize_t ignored = ::write(pipe_[1], &byte, 1);
        (void)ignored;
        return;
      }
      // Sleeps until the next look, or until a member's launcher ends.
      links_.ended(others(), static_cast<int>(kLookEvery.count()));
    }
  });
}

void RoundWatch::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  stop_ = false;
}

std::string RoundWatch::check() { return look(); }

std::vector<std::string> RoundWatch::others() const {
  std::vector<std::string> ids;
  for (const Member& m : round_.members) {
    if (m.id != self_) ids.push_back(m.id);
  }
  return ids;
}

std::string RoundWatch::node_text(const std::string& id) const {
  const int node = round_.node_rank(id);
  return "node " + std::to_string(node) + " (" + round_.members[static_cast<size_t>(node)].host + ")";
}

std::string RoundWatch::member_ended() const {
  const std::vector<std::string> ended = links_.ended(others(), 0);
  return ended.empty() ? "" : ended.front();
}

std::string RoundWatch::look() {
  const std::string round = "round " + std::to_string(round_.number);
  // Nothing may escape the watch's thread: a store that stops answering is a reason too.
  try {
    if (std::optional<RoundEnd> e = rendezvous_.end_of(round_.number)) return round + " ended: " + e->why;
    if (std::optional<std::string> why = rendezvous_.gone(self_)) {
      taken_for_gone_ = true;
      return "this launcher was taken for gone (" + *why + ")";
    }
    // A launcher leaves by itself once every member's ranks have finished: read after its
    // going was seen, the count tells that apart from a launcher lost.
    auto round_complete = [&] {
      return rendezvous_.done_count(round_.number) >= static_cast<int64_t>(round_.members.size());
    };
    for (const std::string& id : links_.ended(others(), 0)) {
      if (round_complete()) return "";
      // Marked gone unless it left by itself (then its own mark says why).
      rendezvous_.mark_gone(id, "its launcher ended");
      const std::string why = "the launcher of " + node_text(id) + " ended";
      return round + " ended: " + rendezvous_.end(round_.number, {true, 1, why, RoundEndCause::kLauncherEnded}).why;
    }
    for (const std::string& id : liveness_.observe(*store_, others())) {
      if (round_complete()) return "";
      const std::string silence = "no heartbeat for " + seconds_text(options_.heartbeat_timeout);
      rendezvous_.mark_gone(id, silence);
      const std::string why = "the launcher of " + node_text(id) + " went away: " + rendezvous_.gone(id).value_or(silence);
      return round + " ended: " + rendezvous_.end(round_.number, {true, 1, why, RoundEndCause::kLauncherWentAway}).why;
    }
    // Room for a machine that waits, as long as no member has finished: a membership
    // change, not a failure.
    if (static_cast<int>(round_.members.size()) < options_.max_nodes && rendezvous_.done_count(round_.number) == 0) {
      std::vector<std::string> waiting = rendezvous_.waiting(round_.number);
      liveness_.observe(*store_, waiting);
      size_t live = 0;
      for (const std::string& id : waiting) live += liveness_.alive(id) ? 1 : 0;
      if (live > 0) {
        const std::string why = machines_text(live) + (live == 1 ? " waits" : " wait") + " to join";
        return round + " ended: " + rendezvous_.end(round_.number, {false, 0, why, RoundEndCause::kMachinesWait}).why;
      }
    }
  } catch (const StoreSilent& e) {
    if (stop_) return "";
    // Waited for up to --rdzv_timeout_s: what() says for how long.
    store_lost_why_ = std::string("lost the rendezvous store: ") + e.what();
    store_lost_ = true;
    return store_lost_why_;
  } catch (const StoreRefused& e) {
    if (stop_) return "";
    // Answered, and refused: another job's store serves the endpoint now.
    store_lost_why_ = "lost the rendezvous store: the endpoint " + options_.endpoint_host + ":" +
                      std::to_string(options_.endpoint_port) + " now refuses this launcher: " + e.what();
    store_lost_ = true;
    return store_lost_why_;
  } catch (...) {
    // Told to stop while it waited for the store: the caller's own requests find out.
    if (stop_) return "";
    // Its clients give up at once only where nothing listens at the endpoint any more.
    store_lost_why_ = "lost the rendezvous store at " + options_.endpoint_host + ":" +
                      std::to_string(options_.endpoint_port) +
                      " (its launcher ended?): " + local::describe_current_exception();
    store_lost_ = true;
    return store_lost_why_;
  }
  return "";
}

}  // namespace launch
}  // namespace distcomm
