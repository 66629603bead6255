// While a round runs, each launcher watches the rendezvous for a reason to stop its ranks:
// the round ended (another machine's rank failed, a machine waits to join), a member's
// launcher went away (its heartbeat stopped: this launcher marks it gone and ends the
// round), or this launcher was itself taken for gone. A thread looks every poll and wakes
// the attempt (AttemptWatch) once there is a reason; check() is the same look, for the
// launcher's own thread while it waits for the others to finish.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "api/store/store.h"
#include "launch/attempt.h"
#include "launch/elastic_options.h"
#include "launch/launcher_links.h"
#include "launch/rendezvous.h"

namespace distcomm {
namespace launch {

class RoundWatch {
 public:
  // connect: the watch's own store client (RendezvousEndpoint::connect_again), told to give
  // up waiting for a store that does not answer once stop() is called. A store that does
  // not answer is no reason to stop the ranks until its client gives up (StoreSilent, after
  // --rdzv_timeout_s): the look waits for it. links: to the round's other launchers (the
  // caller connects them, and keeps them).
  using Connect = std::function<std::unique_ptr<Store>(const std::function<bool()>& give_up)>;
  RoundWatch(const Connect& connect, const ElasticOptions& options, int max_restarts, Round round,
             std::string self_id, const LauncherLinks& links);
  ~RoundWatch();
  RoundWatch(const RoundWatch&) = delete;
  RoundWatch& operator=(const RoundWatch&) = delete;

  // Starts looking on a thread of its own; attempt_watch().fd becomes readable once there
  // is a reason to stop.
  void start();
  void stop();
  const AttemptWatch& attempt_watch() const { return attempt_watch_; }
  // One look (not while the thread runs): why the ranks must stop, "" if nothing says so.
  std::string check();
  // A member whose launcher ended, as its link says now (any thread): its id, "" if none.
  std::string member_ended() const;
  std::string node_text(const std::string& id) const;  // "node 2 (10.0.0.3)"
  bool store_lost() const { return store_lost_; }
  // What store_lost() says, in words ("lost the rendezvous store at ...: <why>"); read it
  // after stop().
  const std::string& store_lost_why() const { return store_lost_why_; }
  bool taken_for_gone() const { return taken_for_gone_; }

 private:
  std::string look();
  std::vector<std::string> others() const;

  std::atomic<bool> stop_{false};
  std::unique_ptr<Store> store_;
  const ElasticOptions options_;
  Rendezvous rendezvous_;
  Liveness liveness_;
  const Round round_;
  const std::string self_;
  const LauncherLinks& links_;
  std::atomic<bool> store_lost_{false};
  std::string store_lost_why_;  // written before store_lost_ is set
  std::atomic<bool> taken_for_gone_{false};
  int pipe_[2] = {-1, -1};
  std::mutex mu_;
  std::string reason_;
  std::thread thread_;
  AttemptWatch attempt_watch_;
};

}  // namespace launch
}  // namespace distcomm
