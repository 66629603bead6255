#include "launch/rendezvous.h"

#include <unistd.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <thread>

#include "api/process/job_identity.h"

namespace distcomm {
namespace launch {
namespace {

using Clock = std::chrono::steady_clock;

// How often a launcher in the rendezvous looks at the store again. Rounds form in a few
// polls; the store is this job's alone and a poll is a few small requests.
constexpr std::chrono::milliseconds kPoll{50};

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  if (text.empty()) return parts;
  size_t start = 0;
  while (true) {
    const size_t at = text.find(sep, start);
    parts.push_back(text.substr(start, at - start));
    if (at == std::string::npos) return parts;
    start = at + 1;
  }
}

std::string encode(const Member& m) {
  return m.id + "," + m.host + "," + std::to_string(m.nproc) + "," + std::to_string(m.port) + "," +
         std::to_string(m.alive_port);
}

std::string encode(const std::vector<Member>& members) {
  std::string text;
  for (const Member& m : members) text += (text.empty() ? "" : ";") + encode(m);
  return text;
}

std::vector<Member> decode_members(const std::string& text) {
  std::vector<Member> members;
  for (const std::string& item : split(text, ';')) {
    const std::vector<std::string> f = split(item, ',');
    if (f.size() != 5) throw std::runtime_error("rendezvous: a malformed member '" + item + "' in the store");
    members.push_back({f[0], f[1], std::stoi(f[2]), std::stoi(f[3]), std::stoi(f[4])});
  }
  return members;
}

// A round's value: open with its members so far, or closed.
struct RoundState {
  bool closed = false;
  Round round;
};

RoundState decode_round(int number, const std::string& text) {
  RoundState s;
  s.round.number = number;
  if (text.empty()) return s;  // nobody joined yet
  const std::vector<std::string> f = split(text, '|');
  if (f.size() == 2 && f[0] == "open") {
    s.round.members = decode_members(f[1]);
    return s;
  }
  if (f.size() == 5 && f[0] == "closed") {
    s.closed = true;
    s.round.restarts = std::stoi(f[1]);
    s.round.run_id = f[2];
    s.round.token = f[3];
    s.round.members = decode_members(f[4]);
    return s;
  }
  throw std::runtime_error("rendezvous: a malformed round " + std::to_string(number) + " in the store: '" + text + "'");
}

std::string encode_open(const std::vector<Member>& members) { return "open|" + encode(members); }

std::string encode_closed(const Round& r) {
  return "closed|" + std::to_string(r.restarts) + "|" + r.run_id + "|" + r.token + "|" + encode(r.members);
}

bool has(const std::vector<Member>& members, const std::string& id) {
  return std::any_of(members.begin(), members.end(), [&](const Member& m) { return m.id == id; });
}

std::string round_key(int r) { return "round/" + std::to_string(r); }

constexpr char kRefusedCount[] = "refused/count";
std::string refused_key(int64_t n) { return "refused/" + std::to_string(n); }

// "the launcher on vm (pid 123)": a refused launcher has no node rank nor launcher id yet.
std::string this_launcher_text() {
  char host[256] = {0};
  if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') host[0] = '?';
  return "the launcher on " + std::string(host) + " (pid " + std::to_string(::getpid()) + ")";
}

// "3" or "1:3", as --nnodes was given.
std::string nnodes_text(const ElasticOptions& o) {
  return o.min_nodes == o.max_nodes ? std::to_string(o.min_nodes)
                                    : std::to_string(o.min_nodes) + ":" + std::to_string(o.max_nodes);
}

std::string seconds_text(Clock::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) + " s";
}

std::string joined(const std::vector<std::string>& items, const std::string& sep) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : sep) + item;
  return text;
}

}  // namespace

int Round::node_rank(const std::string& id) const {
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

int Round::world_size() const { return first_rank(static_cast<int>(members.size())); }

int Round::first_rank(int node_rank) const {
  int rank = 0;
  for (int i = 0; i < node_rank; ++i) rank += members[static_cast<size_t>(i)].nproc;
  return rank;
}

std::string machines_text(size_t n) { return std::to_string(n) + (n == 1 ? " machine" : " machines"); }

std::vector<std::string> Liveness::observe(Store& store, const std::vector<std::string>& ids) {
  std::vector<std::string> newly_gone;
  for (const std::string& id : ids) {
    Seen& s = seen_[id];
    if (s.gone) continue;
    const bool first = s.changed == Clock::time_point();
    if (store.check({"gone/" + id})) {
      s.gone = true;
      newly_gone.push_back(id);
      continue;
    }
    const std::string beat = store.check({"hb/" + id}) ? to_string(store.get("hb/" + id)) : "";
    const auto now = Clock::now();
    const bool unwatched = !first && now - s.looked >= timeout_;
    s.looked = now;
    if (first || unwatched || beat != s.beat) {
      s.beat = beat;
      s.changed = now;
    } else if (now - s.changed >= timeout_) {
      s.gone = true;
      newly_gone.push_back(id);
    }
  }
  return newly_gone;
}

bool Liveness::alive(const std::string& id) const {
  auto it = seen_.find(id);
  return it == seen_.end() || !it->second.gone;
}

std::chrono::milliseconds progress_interval(const ElasticOptions& options) {
  return std::clamp<std::chrono::milliseconds>(options.timeout / 4, std::chrono::seconds(1), std::chrono::seconds(30));
}

Rendezvous::Rendezvous(Store& store, const ElasticOptions& options, int max_restarts,
                       std::function<void(const std::string&)> say)
    : store_(store), options_(options), max_restarts_(max_restarts), say_(std::move(say)) {}

std::vector<std::string> Rendezvous::new_refusals() {
  std::vector<std::string> found;
  const int64_t count = store_.add(kRefusedCount, 0);
  // A refused launcher adds to the count, then writes its words: one not written yet is
  // read at a later poll (one that died in between holds the later ones back, at worst).
  while (refusals_seen_ < count) {
    std::optional<std::string> text = read(refused_key(refusals_seen_ + 1));
    if (!text) break;
    ++refusals_seen_;
    const size_t bar = text->find('|');
    found.push_back(bar == std::string::npos ? *text : text->substr(0, bar) + " (" + text->substr(bar + 1) + ")");
  }
  return found;
}

std::optional<std::string> Rendezvous::read(const std::string& key) {
  // Keys are never deleted: once check() sees one, get() returns at once.
  if (!store_.check({key})) return std::nullopt;
  return to_string(store_.get(key));
}

void Rendezvous::agree_on_settings() {
  const std::string mine =
      std::to_string(options_.min_nodes) + ":" + std::to_string(options_.max_nodes) + ":" + std::to_string(max_restarts_);
  const std::string job = to_string(store_.compare_set("settings", {}, to_bytes(mine)));
  if (job == mine) return;
  const std::vector<std::string> f = split(job, ':');
  // Said in the store before this launcher ends: the others, waiting for machines, say at
  // once that one was refused and why (best-effort: this launcher ends saying why anyway).
  auto tell_the_others = [&](const std::string& why) {
    try {
      const int64_t n = store_.add(kRefusedCount, 1);
      store_.set(refused_key(n), to_bytes(this_launcher_text() + "|" + why));
    } catch (const std::exception&) {
    }
  };
  if (f.size() == 3 && f[2] != std::to_string(max_restarts_)) {
    tell_the_others("--max_restarts=" + std::to_string(max_restarts_) + " where the job uses " + f[2]);
    throw std::invalid_argument("--max_restarts=" + std::to_string(max_restarts_) + ": the job's launchers use " +
                                f[2] + " (set by the first launcher of rendezvous '" + options_.rdzv_id +
                                "'); every machine must be given the same");
  }
  tell_the_others("--nnodes=" + nnodes_text(options_) + " where the job uses " +
                  (f.size() == 3 ? (f[0] == f[1] ? f[0] : f[0] + ":" + f[1]) : job));
  throw std::invalid_argument("--nnodes=" + std::to_string(options_.min_nodes) + ":" +
                              std::to_string(options_.max_nodes) + ": the job's launchers use " +
                              (f.size() == 3 ? f[0] + ":" + f[1] : job) + " (set by the first launcher of rendezvous '" +
                              options_.rdzv_id + "'); every machine must be given the same");
}

void Rendezvous::append(const std::string& key, const std::string& item) {
  std::string now = read(key).value_or("");
  while (true) {
    const std::vector<std::string> items = split(now, ';');
    if (std::find(items.begin(), items.end(), item) != items.end()) return;
    const std::string desired = now.empty() ? item : now + ";" + item;
    const std::string stored = to_string(store_.compare_set(key, to_bytes(now), to_bytes(desired)));
    if (stored == desired) return;
    now = stored;
  }
}

int Rendezvous::current_round() { return std::stoi(to_string(store_.compare_set("current", {}, to_bytes("1")))); }

void Rendezvous::next_round_after(int round) {
  store_.compare_set("current", to_bytes(std::to_string(round)), to_bytes(std::to_string(round + 1)));
}

std::optional<RoundEnd> Rendezvous::end_of(int round) {
  std::optional<std::string> text = read(round_key(round) + "/end");
  if (!text) return std::nullopt;
  std::optional<RoundEnd> e = decode_round_end(*text);
  if (!e) throw std::runtime_error("rendezvous: a malformed end of round " + std::to_string(round) + ": '" + *text + "'");
  return e;
}

RoundEnd Rendezvous::end(int round, const RoundEnd& e) {
  store_.compare_set(round_key(round) + "/end", {}, to_bytes(encode_round_end(e)));
  next_round_after(round);
  return *end_of(round);
}

std::vector<std::string> Rendezvous::waiting(int round) {
  return split(read(round_key(round) + "/waiting").value_or(""), ';');
}

void Rendezvous::mark_gone(const std::string& id, const std::string& why) {
  store_.compare_set("gone/" + id, {}, to_bytes(why));
}

std::optional<std::string> Rendezvous::gone(const std::string& id) { return read("gone/" + id); }

void Rendezvous::mark_done(int round, const std::string& id) { append(round_key(round) + "/done", id); }
int64_t Rendezvous::done_count(int round) {
  return static_cast<int64_t>(split(read(round_key(round) + "/done").value_or(""), ';').size());
}
void Rendezvous::mark_finished(int round) { store_.compare_set("finished", {}, to_bytes(std::to_string(round))); }
bool Rendezvous::finished() { return store_.check({"finished"}); }

RoundEnd Rendezvous::stop_job(const RoundEnd& stop) {
  const std::string stands = to_string(store_.compare_set("stopped", {}, to_bytes(encode_round_end(stop))));
  const std::optional<RoundEnd> e = decode_round_end(stands);
  if (!e) throw std::runtime_error("rendezvous: a malformed job stop: '" + stands + "'");
  // The running round's members read its end (their watches), not the job's stop: it ends
  // with the stop (a round that ended already keeps its end, and they read the stop after).
  const int r = current_round();
  const std::optional<std::string> text = read(round_key(r));
  if (text && decode_round(r, *text).closed) end(r, *e);
  return *e;
}

std::optional<RoundEnd> Rendezvous::job_stop() {
  std::optional<std::string> text = read("stopped");
  if (!text) return std::nullopt;
  std::optional<RoundEnd> e = decode_round_end(*text);
  if (!e) throw std::runtime_error("rendezvous: a malformed job stop: '" + *text + "'");
  return e;
}

void Rendezvous::mark_stop_seen(const std::string& id) { store_.compare_set("stop_seen/" + id, {}, to_bytes("1")); }
bool Rendezvous::stop_seen(const std::string& id) { return store_.check({"stop_seen/" + id}); }

std::optional<Round> Rendezvous::join(const Member& self, Liveness& liveness, const std::function<bool()>& interrupted) {
  const auto deadline = Clock::now() + options_.timeout;
  int r = current_round();
  bool waiting_registered = false;
  Clock::time_point min_reached;  // when this launcher first saw min_nodes live members in round r
  const auto began = Clock::now();
  auto next_progress = began + progress_interval(options_);
  std::vector<std::string> refused;  // every refusal said so far, for the progress lines
  std::vector<std::string> others;   // the open round's other live members, as last seen
  others_seen_.clear();
  while (true) {
    if (interrupted()) return std::nullopt;
    // The launcher serving the store was stopped: no round forms any more.
    if (std::optional<RoundEnd> stop = job_stop()) throw JobStopped(*stop);
    const std::string key = round_key(r);
    const std::string text = read(key).value_or("");
    const RoundState state = decode_round(r, text);
    if (state.closed) {
      if (has(state.round.members, self.id)) return state.round;
      // Running without this launcher: it waits for the next round, and says so, so that
      // the members can make room for it (a membership change) while they are below max.
      if (finished()) return std::nullopt;
      if (end_of(r)) {
        next_round_after(r);
      } else {
        if (!waiting_registered) {
          append(key + "/waiting", self.id);
          waiting_registered = true;
        }
        // The members end their round for this launcher, or when one of them fails; if
        // every one of them has gone, nobody is left to: the waiting launcher does.
        std::vector<std::string> ids;
        for (const Member& m : state.round.members) ids.push_back(m.id);
        others_seen_ = ids;
        liveness.observe(store_, ids);
        if (std::none_of(ids.begin(), ids.end(), [&](const std::string& id) { return liveness.alive(id); })) {
          end(r, {true, 1, "every machine of round " + std::to_string(r) + " went away", RoundEndCause::kEveryoneWentAway});
        }
      }
      const int now = current_round();
      if (now != r) {
        r = now;
        waiting_registered = false;
        min_reached = Clock::time_point();
        continue;
      }
    } else if (!has(state.round.members, self.id)) {
      if (static_cast<int>(state.round.members.size()) < options_.max_nodes) {
        std::vector<Member> members = state.round.members;
        members.push_back(self);
        store_.compare_set(key, to_bytes(text), to_bytes(encode_open(members)));
        continue;  // see what stands now
      }
    } else {
      // A member of the open round: close it when it may close. Members whose launcher
      // went away meanwhile are left out.
      std::vector<std::string> ids;
      for (const Member& m : state.round.members) ids.push_back(m.id);
      std::vector<std::string> expected;  // who was in or waiting for the last round
      if (r > 1) {
        std::optional<std::string> previous = read(round_key(r - 1));
        if (previous) {
          for (const Member& m : decode_round(r - 1, *previous).round.members) expected.push_back(m.id);
        }
        for (const std::string& id : waiting(r - 1)) expected.push_back(id);
      }
      std::vector<std::string> watched = ids;
      watched.insert(watched.end(), expected.begin(), expected.end());
      liveness.observe(store_, watched);
      std::vector<Member> live;
      for (const Member& m : state.round.members) {
        if (liveness.alive(m.id) || m.id == self.id) live.push_back(m);
      }
      const int n = static_cast<int>(live.size());
      // Who must read a give-up: the live members, and the live launchers of the last round
      // (and its waiting ones) that have not come back yet (still stopping their ranks).
      others.clear();
      for (const Member& m : live) {
        if (m.id != self.id) others.push_back(m.id);
      }
      for (const std::string& id : expected) {
        if (id != self.id && liveness.alive(id) && !has(live, id) &&
            std::find(others.begin(), others.end(), id) == others.end()) {
          others.push_back(id);
        }
      }
      others_seen_ = others;
      // Another member gave the round up at its deadline: this one ends with its words.
      if (std::optional<std::string> gave_up = read(key + "/gave_up")) throw RendezvousGaveUp(*gave_up, others);
      const std::string round_text = "rendezvous '" + options_.rdzv_id + "' round " + std::to_string(r);
      for (const std::string& who : new_refusals()) {
        refused.push_back(who);
        say(round_text + ": refused " + who + "; still waiting for a launcher given the job's flags (have " +
            std::to_string(n) + " of --nnodes=" + nnodes_text(options_) + ", min " +
            std::to_string(options_.min_nodes) + ") until --rdzv_timeout_s=" +
            std::to_string(options_.timeout.count() / 1000));
      }
      if (n < options_.min_nodes && Clock::now() >= next_progress) {
        next_progress = Clock::now() + progress_interval(options_);
        say(round_text + ": waiting for machines: have " + std::to_string(n) + " of --nnodes=" +
            nnodes_text(options_) + " (min " + std::to_string(options_.min_nodes) + ") for " +
            seconds_text(Clock::now() - began) + (refused.empty() ? "" : "; refused: " + joined(refused, "; ")) +
            "; giving up after --rdzv_timeout_s=" + std::to_string(options_.timeout.count() / 1000));
      }
      if (n >= options_.min_nodes && min_reached == Clock::time_point()) min_reached = Clock::now();
      bool everyone_expected = r > 1;
      for (const std::string& id : expected) {
        if (liveness.alive(id) && !has(live, id)) everyone_expected = false;
      }
      const bool may_close = n >= options_.max_nodes ||
                             (n >= options_.min_nodes &&
                              (everyone_expected || Clock::now() - min_reached >= options_.last_call));
      if (may_close) {
        Round closed;
        closed.number = r;
        closed.members = live;
        if (r > 1) {
          std::optional<std::string> previous = read(round_key(r - 1));
          const int before = previous ? decode_round(r - 1, *previous).round.restarts : 0;
          std::optional<RoundEnd> how = end_of(r - 1);
          closed.restarts = before + (how && how->restart ? 1 : 0);
        }
        // The ranks' identity for this round: nothing of an earlier round's store can be
        // read by this one's ranks, nor theirs by a straggler of the last round.
        const JobIdentity fresh = new_job_identity();
        closed.run_id = options_.rdzv_id + "-r" + std::to_string(r) + "-" + fresh.run_id.substr(0, 8);
        closed.token = fresh.token;
        store_.compare_set(key, to_bytes(text), to_bytes(encode_closed(closed)));
        continue;  // read back what stands: ours or another launcher's
      }
    }
    if (Clock::now() >= deadline) {
      const std::string within = " within --rdzv_timeout_s=" + std::to_string(options_.timeout.count() / 1000);
      const std::string head = "rendezvous '" + options_.rdzv_id + "' round " + std::to_string(r) + ": ";
      if (state.closed) throw std::runtime_error(head + "running without this machine, and no new round began" + within);
      const int n = static_cast<int>(state.round.members.size());
      const std::string mine = head + "only " + machines_text(static_cast<size_t>(n)) + " of --nnodes min " +
                               std::to_string(options_.min_nodes) + " came" + within;
      if (!has(state.round.members, self.id)) throw std::runtime_error(mine);
      // The first member to give up names the round's end for all of them (first wins).
      const std::string stands = to_string(store_.compare_set(key + "/gave_up", {}, to_bytes(mine)));
      throw RendezvousGaveUp(stands, others);
    }
    std::this_thread::sleep_for(kPoll);
  }
}

}  // namespace launch
}  // namespace distcomm
