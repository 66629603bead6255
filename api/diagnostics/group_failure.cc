#include "api/diagnostics/group_failure.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "api/diagnostics/bounded_call.h"
#include "api/diagnostics/failure_adoption.h"
#include "api/diagnostics/op_fingerprint.h"
#include "api/errors.h"
#include "api/errors_internal.h"
#include "api/process/failure_origin.h"
#include "api/store/internal/store_host.h"
#include "api/store/prefix_store.h"
#include "api/store/tcp_store.h"

namespace distcomm {
namespace {

// Where a failing rank leaves its record, in the backend's (already prefixed) store.
const char kBoardKey[] = "failure";
const char kFormat[] = "distcomm-failure-1";

// The order that makes every rank report the cause: a failing rank stores its record, and
// only then cuts its connections (the abort hooks); a peer that sees a connection closed
// reads the board after that, so one read finds the record. Neither side may give up on a
// store that is merely slow (a loaded machine), or the peer reports the closed connection
// instead; only a store that does not answer for this long is taken as gone (its server
// may be the rank that died), so that a failure never turns into a hang.
constexpr std::chrono::milliseconds kStoreAnswerWait{3000};
// How long a peer keeps looking when the first read found nothing: a rank whose
// connections closed before its record was stored (gloo closes them all itself when one of
// its waits times out; a publish that ran out of kStoreAnswerWait). Not when the backend
// names the rank that closed the connection: see record().
constexpr std::chrono::milliseconds kLookupWindow{1000};
// The same wait when the backend named the rank it lost (a dead process, a closed
// connection): that rank may be the one that served the store, whose client then retries
// for seconds; a dead peer is named within a second, with the board's record when it
// answers in time, else with this rank's own words.
constexpr std::chrono::milliseconds kNamedLossAnswerWait{300};
// How long a peer waits for a record that says its rank left while its program was failing
// (kLeftWhileFailing) to be completed with the error: the rank publishes it as soon as its
// exception reaches run_main, after the unwinding's destructors (milliseconds, normally).
constexpr std::chrono::milliseconds kCompletionWait{1500};

const char kUnusable[] = "the group is unusable since an earlier failure; create a new group. First failure";

// A distcomm error as it is; anything else becomes Error with its message.
std::exception_ptr as_distcomm_error(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error&) {
    return e;
  } catch (...) {
    return std::make_exception_ptr(Error(message_of(e)));
  }
}

FailureRecord::Kind kind_of(std::exception_ptr e) { return FailureRecord::kind_of(e); }

using internal::same_loss;

}  // namespace

namespace {

// The store a board's calls end at: boards that are PrefixStores over one store (every
// group's over the job's TCPStore) share its one connection.
const Store* underlying_store(const StorePtr& board) {
  const Store* at = board.get();
  while (const auto* prefixed = dynamic_cast<const PrefixStore*>(at)) at = prefixed->base().get();
  return at;
}

// The stores that left a call of some GroupFailure of this process unanswered in time, until
// a stall watch's look at one of their boards is answered again. Every group's board is a
// PrefixStore over the job's one store: a hierarchy's levels, its flat backend and itself
// each found the store silent in turn, each after a wait of its own (3 s to publish, 4 s to
// explain), which held a hierarchical op's Timeout seconds past its deadline. Never
// destroyed (read by backend threads while the process exits).
std::mutex& silent_mutex() {
  static auto* mu = new std::mutex;
  return *mu;
}
// Weak: a store destroyed while marked (a test's, a job's torn down with its server
// stopped) must not mark another later built at the same address.
std::vector<std::weak_ptr<Store>>& silent_stores() {
  static auto* of = new std::vector<std::weak_ptr<Store>>;
  return *of;
}
// The store a board's calls end at, owned (see underlying_store).
StorePtr underlying_owned(const StorePtr& board) {
  StorePtr at = board;
  while (const auto* prefixed = dynamic_cast<const PrefixStore*>(at.get())) at = prefixed->base();
  return at;
}
// The marked entry of `store` (silent_mutex held), dropping those whose store is gone.
std::vector<std::weak_ptr<Store>>::iterator silent_entry(const StorePtr& store) {
  auto& of = silent_stores();
  of.erase(std::remove_if(of.begin(), of.end(), [](const std::weak_ptr<Store>& w) { return w.expired(); }), of.end());
  return std::find_if(of.begin(), of.end(), [&](const std::weak_ptr<Store>& w) { return w.lock() == store; });
}
// " (10.0.0.1:29500)" for a board over a TCPStore, else "".
std::string store_address_text(const StorePtr& board) {
  if (!board) return "";
  const auto* tcp = dynamic_cast<const TCPStore*>(underlying_store(board));
  if (!tcp) return "";
  return " (" + tcp->host() + ":" + std::to_string(tcp->port()) + ")";
}

bool store_silent(const StorePtr& board) {
  if (!board) return false;
  const StorePtr store = underlying_owned(board);
  std::lock_guard<std::mutex> lock(silent_mutex());
  if (silent_stores().empty()) return false;  // the usual case: no scan
  return silent_entry(store) != silent_stores().end();
}
void set_store_silent(const StorePtr& board, bool silent) {
  if (!board) return;
  const StorePtr store = underlying_owned(board);
  std::lock_guard<std::mutex> lock(silent_mutex());
  auto at = silent_entry(store);
  if (silent && at == silent_stores().end()) silent_stores().push_back(store);
  if (!silent && at != silent_stores().end()) silent_stores().erase(at);
}

}  // namespace

template <typename R>
std::optional<R> GroupFailure::ask_board(std::function<R()> fn, std::chrono::milliseconds answer_wait) const {
  if (store_silent(board_)) {
    board_gone_.store(true);
    return std::nullopt;
  }
  const bool was_gone = board_gone_.load();
  std::optional<R> answer = internal::call_with_limit<R>(std::move(fn), answer_wait, &board_gone_);
  if (!was_gone && board_gone_.load()) set_store_silent(board_, true);
  return answer;
}

bool GroupFailure::store_unanswered(const StorePtr& board) { return store_silent(board); }

bool GroupFailure::board_silent() const { return board_gone_.load() || store_silent(board_); }

FailureRecord::Kind FailureRecord::kind_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Timeout&) {
    return Kind::kTimeout;
  } catch (const PeerFailure&) {
    return Kind::kPeerFailure;
  } catch (const Desync&) {
    return Kind::kDesync;
  } catch (const InvalidArgument&) {
    return Kind::kInvalidArgument;
  } catch (...) {
    return Kind::kOther;
  }
}

std::string FailureRecord::encode() const {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(time.time_since_epoch()).count();
  std::ostringstream out;
  out << kFormat << "\n" << static_cast<int>(kind) << "\n" << rank << "\n" << culprit << "\n" << op << "\n"
      << seq << "\n" << ms << "\n" << message;
  return out.str();
}

std::optional<FailureRecord> FailureRecord::decode(const std::string& text) {
  std::istringstream in(text);
  std::string format, kind, rank, culprit, op, seq, ms;
  if (!std::getline(in, format) || format != kFormat || !std::getline(in, kind) || !std::getline(in, rank) ||
      !std::getline(in, culprit) || !std::getline(in, op) || !std::getline(in, seq) || !std::getline(in, ms)) {
    return std::nullopt;
  }
  FailureRecord r;
  try {
    const int k = std::stoi(kind);
    if (k < 0 || k > static_cast<int>(Kind::kInvalidArgument)) return std::nullopt;
    r.kind = static_cast<Kind>(k);
    r.rank = std::stoi(rank);
    r.culprit = std::stoi(culprit);
    r.seq = std::stoll(seq);
    r.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(std::stoll(ms)));
  } catch (const std::exception&) {
    return std::nullopt;
  }
  r.op = op;
  const auto start = static_cast<size_t>(in.tellg());
  r.message = start < text.size() ? text.substr(start) : "";
  return r;
}

// The followers of this process (on_sibling_failure), by the board they follow. A
// follower's hook runs under its own lock, which its GroupFailure's destructor takes to
// end it: a hook never runs into a destroyed owner.
struct GroupFailure::Follower {
  const Store* board = nullptr;
  const GroupFailure* owner = nullptr;
  std::mutex mu;
  bool live = true;
  SiblingFailed hook;
};

namespace {

// Both never destroyed: a group's backend threads record losses while the process exits,
// until the group itself is destroyed, and the default group (api/init.cc) is a global made
// before these, so destroyed after them. A list destroyed first was read by a gloo watch
// thread of a hierarchical group as exit() destroyed that group: SIGSEGV on every survivor
// of a killed rank.
std::mutex& followers_mutex() {
  static auto* mu = new std::mutex;
  return *mu;
}

std::vector<std::weak_ptr<GroupFailure::Follower>>& followers() {
  static auto* list = new std::vector<std::weak_ptr<GroupFailure::Follower>>;
  return *list;
}

// Each GroupFailure's world ranks (set_world_ranks), kept here rather than in the object:
// plugins built against an older header allocate GroupFailure at that header's size. Read
// only when a failure names a rank. Never destroyed: a plugin's group may outlive statics.
std::mutex& world_ranks_mutex() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::map<const GroupFailure*, std::vector<int>>& world_ranks_of() {
  static auto* of = new std::map<const GroupFailure*, std::vector<int>>;
  return *of;
}

// The size of `g`'s group where set_world_ranks said it, else 0 (explained_by then reads it
// from the cause's own words).
size_t group_size_of(const GroupFailure* g) {
  std::lock_guard<std::mutex> lock(world_ranks_mutex());
  const auto it = world_ranks_of().find(g);
  return it == world_ranks_of().end() ? 0 : it->second.size();
}

}  // namespace

namespace {

// GroupFailures whose groups number their ranks otherwise than the job (process/
// failure_origin.h): their losses name no job rank. A set beside the class, as the world
// ranks are, so that its layout stays what plugins allocate.
std::set<const GroupFailure*>& with_ranks_of_their_own() {
  static auto* of = new std::set<const GroupFailure*>;  // guarded by world_ranks_mutex()
  return *of;
}

}  // namespace

GroupFailure::GroupFailure(int rank, StorePtr board) : rank_(rank), board_(std::move(board)) {
  if (creating_groups_with_ranks_of_their_own()) {
    std::lock_guard<std::mutex> lock(world_ranks_mutex());
    with_ranks_of_their_own().insert(this);
  }
}

void GroupFailure::set_world_ranks(std::vector<int> world_ranks) {
  std::lock_guard<std::mutex> lock(world_ranks_mutex());
  world_ranks_of()[this] = std::move(world_ranks);
}

std::string GroupFailure::world_rank_text(int group_rank) const {
  if (group_rank < 0) return "";
  std::lock_guard<std::mutex> lock(world_ranks_mutex());
  const auto it = world_ranks_of().find(this);
  if (it == world_ranks_of().end() || static_cast<size_t>(group_rank) >= it->second.size()) return "";
  const int world = it->second[static_cast<size_t>(group_rank)];
  return world == group_rank ? "" : " (world rank " + std::to_string(world) + ")";
}

int GroupFailure::world_rank_of(int group_rank) const {
  if (group_rank < 0) return -1;
  std::lock_guard<std::mutex> lock(world_ranks_mutex());
  if (with_ranks_of_their_own().count(this)) return -1;
  const auto it = world_ranks_of().find(this);
  if (it == world_ranks_of().end() || it->second.empty()) return group_rank;
  return static_cast<size_t>(group_rank) < it->second.size() ? it->second[static_cast<size_t>(group_rank)] : -1;
}

namespace {

// Whether a message names a rank by number ("rank 2", "ranks [1, 3]"): in a subgroup those
// are the subgroup's numbers.
bool names_a_rank(const std::string& message) {
  for (size_t at = message.find("rank"); at != std::string::npos; at = message.find("rank", at + 4)) {
    size_t next = at + 4;
    if (next < message.size() && message[next] == 's') ++next;
    if (next + 1 < message.size() && message[next] == ' ' &&
        (std::isdigit(static_cast<unsigned char>(message[next + 1])) || message[next + 1] == '[')) {
      return true;
    }
  }
  return false;
}

// The first this many of a large subgroup's world ranks are listed; a strided one (a
// DeviceMesh's dimension) is said by its formula whatever its size.
constexpr size_t kListedWorldRanks = 64;

// The group an op's description names ("rank 1/2 (world rank 3) group 'world/g0'
// all_reduce #1 (...)"): "world/g0"; "" when it names none.
std::string group_named_in(const std::string& where) {
  const std::string head = "group '";
  const size_t at = where.find(head);
  if (at == std::string::npos) return "";
  const size_t end = where.find('\'', at + head.size());
  return end == std::string::npos ? "" : where.substr(at + head.size(), end - at - head.size());
}

// "group 'world/g0' ranks [0, 1, 2] are world ranks [1, 3, 5]" ("this group's ranks ..."
// when the name is not known); "" where they are the same. Named, because a failure may
// quote another group's words with that group's map (a hierarchy's level's).
std::string world_ranks_note(const std::vector<int>& world, const std::string& name) {
  std::vector<int> group(world.size());
  for (size_t r = 0; r < world.size(); ++r) group[r] = static_cast<int>(r);
  if (world.empty() || world == group) return "";
  const std::string whose = name.empty() ? "this group's" : "group '" + name + "'";
  if (world.size() <= kListedWorldRanks) {
    return whose + " ranks " + rank_list_text(group) + " are world ranks " + rank_list_text(world);
  }
  const int stride = world[1] - world[0];
  bool strided = true;
  for (size_t r = 1; r < world.size() && strided; ++r) strided = world[r] - world[r - 1] == stride;
  if (strided) {
    return whose + " rank r (0 to " + std::to_string(world.size() - 1) + ") is world rank " + std::to_string(world[0]) +
           " + " + std::to_string(stride) + "r";
  }
  group.resize(kListedWorldRanks);
  const std::vector<int> first(world.begin(), world.begin() + kListedWorldRanks);
  return whose + " ranks " + rank_list_text(group) + " are world ranks " + rank_list_text(first) + " (the first " +
         std::to_string(kListedWorldRanks) + " of " + std::to_string(world.size()) +
         "; ProcessGroup::global_ranks() has them all)";
}

// error with `note` after it: on a line of its own after a message of several lines (a
// Desync's table, whose last row it would otherwise seem to belong to), else after "; ".
std::exception_ptr with_note(std::exception_ptr error, const std::string& message, const std::string& note) {
  if (message.find('\n') == std::string::npos) return with_detail(error, note);
  return with_line(error, note);
}

}  // namespace

std::string GroupFailure::world_ranks_note_for(const std::string& words, const std::string& where) const {
  if (!names_a_rank(words)) return "";
  std::vector<int> world;
  {
    std::lock_guard<std::mutex> lock(world_ranks_mutex());
    const auto it = world_ranks_of().find(this);
    if (it != world_ranks_of().end()) world = it->second;
  }
  return world_ranks_note(world, group_named_in(where));
}

std::exception_ptr GroupFailure::naming_world_rank(std::exception_ptr error, int culprit, const std::string& where) const {
  const std::string message = message_of(error);
  // A lost peer is named once, by itself; a Timeout's or a Desync's words may name several
  // ranks ("ranks [1, 2] are still at all_reduce #11", a table): then the group's map.
  if (culprit < 0 || kind_of(error) != FailureRecord::Kind::kPeerFailure) {
    const std::string note = world_ranks_note_for(message, where);
    if (!note.empty()) return message.find(note) != std::string::npos ? error : with_note(error, message, note);
  }
  const std::string world = world_rank_text(culprit);
  if (world.empty()) return error;
  // Already said: explained_by's "rank 2 (world rank 5) of the group", or a peer's record
  // that said it.
  if (message.find("rank " + std::to_string(culprit) + world) != std::string::npos) return error;
  const std::string world_rank = world.substr(2, world.size() - 3);  // "world rank N"
  const std::string note = "rank " + std::to_string(culprit) + " of this group is " + world_rank;
  if (message.find(note) != std::string::npos) return error;
  return with_detail(error, note);
}

GroupFailure::~GroupFailure() {
  stop_following();
  std::lock_guard<std::mutex> lock(world_ranks_mutex());
  world_ranks_of().erase(this);
  with_ranks_of_their_own().erase(this);
}

void GroupFailure::stop_following() {
  if (!follower_) return;
  std::lock_guard<std::mutex> lock(follower_->mu);
  follower_->live = false;
}

void GroupFailure::on_sibling_failure(SiblingFailed hook) {
  if (!board_) return;
  auto f = std::make_shared<Follower>();
  f->board = board_.get();
  f->owner = this;
  f->hook = std::move(hook);
  std::lock_guard<std::mutex> lock(followers_mutex());
  auto& list = followers();
  list.erase(std::remove_if(list.begin(), list.end(), [](const auto& w) { return w.expired(); }), list.end());
  list.push_back(f);
  follower_ = std::move(f);
}

void GroupFailure::tell_followers(std::exception_ptr error, int culprit) const {
  if (!board_) return;
  std::vector<std::shared_ptr<Follower>> told;
  {
    std::lock_guard<std::mutex> lock(followers_mutex());
    for (const auto& w : followers()) {
      std::shared_ptr<Follower> f = w.lock();
      if (f && f->board == board_.get() && f->owner != this) told.push_back(std::move(f));
    }
  }
  for (const auto& f : told) {
    std::lock_guard<std::mutex> lock(f->mu);
    if (!f->live || !f->hook) continue;
    SiblingFailed hook = std::move(f->hook);  // once
    f->hook = nullptr;
    hook(error, culprit);
  }
}

void GroupFailure::on_abort(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  hooks_.push_back(std::move(hook));
}

std::exception_ptr GroupFailure::refusal() const {
  if (!failed()) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  return refusal_;
}

void GroupFailure::check_usable() const {
  if (std::exception_ptr e = refusal()) std::rethrow_exception(e);
}

std::optional<FailureRecord> GroupFailure::first() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_;
}

void GroupFailure::set_explainer(Explainer explainer) {
  std::lock_guard<std::mutex> lock(mu_);
  explainer_ = std::move(explainer);
}

std::exception_ptr GroupFailure::record(std::exception_ptr error, const Work& op, int culprit) {
  return record_failure(std::move(error), op.description(), &op, culprit);
}

std::exception_ptr GroupFailure::record(std::exception_ptr error, const std::string& where, int culprit) {
  return record_failure(std::move(error), where, nullptr, culprit);
}

std::exception_ptr GroupFailure::record_departure(std::exception_ptr error, const Work& op, int culprit) {
  return record_failure(std::move(error), op.description(), &op, culprit, /*departure=*/true);
}

std::exception_ptr GroupFailure::record_loss(std::exception_ptr error, const Work* op, int culprit) {
  return record_failure(std::move(error), op ? op->description() : "the group (no op in flight)", op, culprit,
                        /*departure=*/false, /*loss=*/true);
}

std::exception_ptr GroupFailure::record_failure(std::exception_ptr error, const std::string& where, const Work* op,
                                                int culprit, bool departure, bool loss) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    // Bounded by the recording threads' own deadlines (their board reads and explainer).
    if (loss) recorded_.wait(lock, [this] { return recording_ == 0 || failed_.load(); });
    if (failed_.load()) {
      if (op != nullptr && op == first_op_ && first_error_) return first_error_;
      return refusal_;  // a consequence of the first failure, which says more
    }
    ++recording_;
  }
  // Ends this recording however record_failure returns.
  struct RecordingEnds {
    GroupFailure& g;
    ~RecordingEnds() {
      std::lock_guard<std::mutex> lock(g.mu_);
      --g.recording_;
      g.recorded_.notify_all();
    }
  } recording_ends{*this};
  error = as_distcomm_error(error);
  FailureRecord r;
  r.kind = kind_of(error);
  // A PeerFailure whose culprit the backend names: it saw that rank's connection close. A
  // rank that fails stores its record before it closes its connections, so one read finds
  // it; a rank that stored none died or exited, and neither waiting for its record nor
  // asking it for a report (the explainer) would bring anything but delay.
  const bool culprit_seen = r.kind == FailureRecord::Kind::kPeerFailure && culprit >= 0;
  bool explained = culprit_seen && !departure;
  bool adopted = false;  // the error is now another rank's record
  if (r.kind == FailureRecord::Kind::kPeerFailure) {
    std::optional<FailureRecord> cause = culprit_seen ? look_up_cause(std::chrono::milliseconds(0), kNamedLossAnswerWait)
                                                      : look_up_cause(kLookupWindow, kStoreAnswerWait);
    // A departure with a board that did not answer in time: nobody can explain it either.
    if (departure && board_silent()) explained = true;
    if (cause && !same_loss(*cause, r.kind, culprit)) {
      cause = completed_cause(*cause);
      error = internal::explained_by(*cause, world_rank_text(cause->rank), op != nullptr, group_size_of(this));
      r.kind = kind_of(error);
      // Who the cause blamed, when it knew; else the rank that failed first.
      culprit = cause->culprit >= 0 ? cause->culprit : cause->rank;
      explained = true;
      adopted = true;
    }
  }
  // Nor when the board did not answer in time once: the explainer asks over it too, and the
  // recording thread (shm's polling one, with the group's ops held) would wait for it again.
  if (!explained && op != nullptr && !board_silent() &&
      (r.kind == FailureRecord::Kind::kPeerFailure || r.kind == FailureRecord::Kind::kTimeout)) {
    Explainer explain;
    {
      std::lock_guard<std::mutex> lock(mu_);
      explain = explainer_;
    }
    if (explain) {
      if (std::exception_ptr better = explain(*op, error)) error = better;
      r.kind = kind_of(error);
    }
  } else if (!explained && op != nullptr && board_silent() && r.kind == FailureRecord::Kind::kTimeout) {
    // Said, not left out: a bare Timeout sends its reader to the ranks, when the store's
    // server (a rank 0 stopped in a debugger, a frozen node) is what keeps anyone from
    // saying who is missing.
    error = with_detail(error, "the others could not be asked: the store's server" + store_address_text(board_) +
                                   " did not answer this rank's last look at the board in time: its process "
                                   "stopped, its host froze, or the network between this host and it is down");
  }
  r.rank = rank_;
  r.culprit = culprit;
  r.op = op ? op_type_name(op->op()) : "";
  r.seq = op ? static_cast<int64_t>(op->seq()) : -1;
  error = naming_world_rank(error, culprit, where);
  std::exception_ptr described = with_context(error, where);
  r.message = message_of(described);
  r.time = std::chrono::system_clock::now();
  // Published before the group is marked here: when another rank's record got there first
  // (two ranks found the same Desync at once; a Timeout here after a peer's failure), that
  // first failure is this rank's answer too -- every rank then reports the same cause.
  std::optional<FailureRecord> earlier = publish(r, culprit_seen ? kNamedLossAnswerWait : kStoreAnswerWait);
  // This rank may serve the store the peers read it from: it stays for them a moment.
  internal::note_failure_for_peers();
  // The same loss, but this rank's words quote a rank that quoted another (shm passes a
  // failure along a ring, one hop per rank): the first failure's record says it once,
  // where the chain grows with every hop until the cause is cut off its end.
  if (earlier && (!same_loss(*earlier, r.kind, r.culprit) || internal::quotes_a_quote(message_of(error)))) {
    earlier = completed_cause(*earlier);
    error = internal::explained_by(*earlier, world_rank_text(earlier->rank), op != nullptr, group_size_of(this));
    r.kind = kind_of(error);
    r.culprit = earlier->culprit >= 0 ? earlier->culprit : earlier->rank;
    error = naming_world_rank(error, r.culprit, where);
    described = with_context(error, where);
    r.message = message_of(described);
    adopted = true;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_.load()) return error;  // another thread recorded first meanwhile
    first_ = r;
    first_op_ = op;
    first_error_ = error;
    // api/process/failure_origin.h. A loss names the lost rank, so that the launcher does
    // not take this rank, which saw the loss first, for the cause (FailureReport::lost_rank).
    note_group_failure_origin(adopted, r.kind == FailureRecord::Kind::kPeerFailure ? world_rank_of(r.culprit) : -1);
    refusal_ = with_context(described, kUnusable);
    failed_.store(true, std::memory_order_release);
    recorded_.notify_all();  // before the abort hooks: a waiter may hold what they need
  }
  run_abort_hooks();
  tell_followers(error, r.culprit);
  return error;
}

void GroupFailure::shut_down(std::exception_ptr refusal, const std::function<bool()>& ops_in_flight) {
  FailureRecord r;
  r.kind = FailureRecord::Kind::kShutDown;
  r.rank = rank_;
  r.message = message_of(refusal);
  r.time = std::chrono::system_clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_.load()) return;  // already cut off, and the peers already told
    first_ = r;
    refusal_ = std::move(refusal);
    failed_.store(true, std::memory_order_release);
    recorded_.notify_all();
  }
  // Marked first, then asked: an op either sees the mark and is refused, or is seen here.
  if (!ops_in_flight || !ops_in_flight()) return;  // a clean close: nobody waits on this rank
  publish(r, kStoreAnswerWait);
  internal::note_failure_for_peers();
  run_abort_hooks();
}

std::optional<std::string> GroupFailure::read_board(std::chrono::milliseconds answer_wait) const {
  if (!board_) return std::nullopt;
  StorePtr board = board_;
  return ask_board<std::string>(
      [board] { return board->check({kBoardKey}) ? to_string(board->get(kBoardKey)) : std::string(); }, answer_wait);
}

void GroupFailure::board_answered_again(bool answered) const {
  // A load first: the watch says so at every tick, the flag is seldom set.
  if (board_gone_.load(std::memory_order_relaxed) == answered) board_gone_.store(!answered);
  if (store_silent(board_) == answered) set_store_silent(board_, !answered);
}

std::optional<FailureRecord> GroupFailure::published(std::chrono::milliseconds answer_wait) const {
  const std::optional<std::string> found = read_board(answer_wait);
  if (!found || found->empty()) return std::nullopt;
  return FailureRecord::decode(*found);
}

std::optional<FailureRecord> GroupFailure::look_up_cause(std::chrono::milliseconds window,
                                                         std::chrono::milliseconds answer_wait) const {
  const auto until = std::chrono::steady_clock::now() + window;
  for (;;) {
    // Each read may take the store's time: the window only bounds how long nothing is found.
    std::optional<std::string> found = read_board(answer_wait);
    if (!found) return std::nullopt;  // no board, or it does not answer (its server may be the rank that died)
    if (!found->empty()) {
      std::optional<FailureRecord> cause = FailureRecord::decode(*found);
      if (cause && cause->rank != rank_) return cause;
      return std::nullopt;
    }
    if (std::chrono::steady_clock::now() >= until) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

FailureRecord GroupFailure::completed_cause(FailureRecord cause) const {
  if (cause.message.find(kErrorNotReportedYet) == std::string::npos) return cause;
  const auto until = std::chrono::steady_clock::now() + kCompletionWait;
  while (std::chrono::steady_clock::now() < until && !board_silent()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const std::optional<std::string> found = read_board(kNamedLossAnswerWait);
    if (!found) break;
    if (found->empty()) continue;
    const std::optional<FailureRecord> now = FailureRecord::decode(*found);
    if (!now || now->rank != cause.rank) break;  // not that rank's record any more
    if (now->message.find(kErrorNotReportedYet) == std::string::npos) return *now;
  }
  return cause;
}

bool GroupFailure::peer_has_failed() const {
  return !failed() && board_ && peer_failure_in(*board_, read_board(kStoreAnswerWait));
}

bool GroupFailure::peer_failure_in(const Store& store, const std::optional<std::string>& record) const {
  if (&store != board_.get()) return peer_has_failed();
  if (failed() || !record || record->empty()) return false;
  std::optional<FailureRecord> cause = FailureRecord::decode(*record);
  return cause && cause->rank != rank_;
}

const char* GroupFailure::board_key() { return kBoardKey; }

std::optional<FailureRecord> GroupFailure::publish(const FailureRecord& record,
                                                   std::chrono::milliseconds answer_wait) const {
  if (!board_) return std::nullopt;
  StorePtr board = board_;
  const Store::Bytes value = to_bytes(record.encode());
  // compare_set: only the first rank to fail leaves its record; later ones would only
  // describe the cascade it started. Waited for: the abort hooks come after it.
  const std::optional<std::string> stored =
      ask_board<std::string>([board, value] { return to_string(board->compare_set(kBoardKey, {}, value)); },
                             answer_wait);
  if (!stored || *stored == to_string(value)) return std::nullopt;
  std::optional<FailureRecord> earlier = FailureRecord::decode(*stored);
  if (earlier && earlier->rank != rank_) return earlier;
  return std::nullopt;
}

std::optional<FailureRecord> GroupFailure::read_record(Store& board) {
  if (!board.check({kBoardKey})) return std::nullopt;
  return FailureRecord::decode(board.get_string(kBoardKey));
}

void GroupFailure::publish_records(const std::vector<std::pair<StorePtr, FailureRecord>>& records) {
  // One thread per store, posting its boards' records in the order given (the world's
  // first): threads of one store would only queue on its connection, in no order, and a
  // slow store would take whichever records came first in the few seconds there are.
  std::vector<std::pair<const Store*, std::vector<std::pair<StorePtr, Store::Bytes>>>> by_store;
  for (const auto& [board, record] : records) {
    if (!board) continue;
    const Store* store = underlying_store(board);
    auto it = std::find_if(by_store.begin(), by_store.end(), [&](const auto& s) { return s.first == store; });
    if (it == by_store.end()) it = by_store.insert(by_store.end(), {store, {}});
    it->second.emplace_back(board, to_bytes(record.encode()));
  }
  std::vector<std::function<bool()>> calls;
  for (auto& entry : by_store) {
    calls.push_back([posts = std::move(entry.second)] {
      for (const auto& [board, value] : posts) {
        try {
          board->compare_set(kBoardKey, {}, value);
        } catch (const std::exception&) {
          // That board's store refused it: the next board's may still take its record.
        }
      }
      return true;
    });
  }
  internal::call_each_with_limit<bool>(std::move(calls), kStoreAnswerWait);
  if (!records.empty()) internal::note_failure_for_peers();
}

void GroupFailure::complete_records(const std::vector<Completion>& completions) {
  std::vector<std::pair<const Store*, std::vector<Completion>>> by_store;
  for (const Completion& c : completions) {
    if (!c.board) continue;
    const Store* store = underlying_store(c.board);
    auto it = std::find_if(by_store.begin(), by_store.end(), [&](const auto& s) { return s.first == store; });
    if (it == by_store.end()) it = by_store.insert(by_store.end(), {store, {}});
    it->second.push_back(c);
  }
  std::vector<std::function<bool()>> calls;
  for (auto& entry : by_store) {
    calls.push_back([posts = std::move(entry.second)] {
      for (const Completion& c : posts) {
        try {
          c.board->compare_set(kBoardKey, to_bytes(c.pending.encode()), to_bytes(c.completed.encode()));
        } catch (const std::exception&) {
          // That board's store refused it: the peers quote the pending record.
        }
      }
      return true;
    });
  }
  internal::call_each_with_limit<bool>(std::move(calls), kStoreAnswerWait);
}

void GroupFailure::run_abort_hooks() {
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (hooks_ran_) return;
    hooks_ran_ = true;
    hooks = hooks_;
  }
  for (const auto& hook : hooks) {
    try {
      hook();
    } catch (...) {
      // A hook that fails must not hide the failure it was run for, nor escape a thread.
    }
  }
}

}  // namespace distcomm

extern "C" void distcomm_group_failure_set_world_ranks(distcomm::GroupFailure* failure, const int* world_ranks,
                                                        size_t count) {
  failure->set_world_ranks(std::vector<int>(world_ranks, world_ranks + count));
}
