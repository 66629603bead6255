#include "tools/trace/dump_analysis.h"

#include <dirent.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "api/diagnostics/group_failure.h"
#include "api/diagnostics/op_fingerprint.h"
#include "tools/trace/level_summary.h"

namespace distcomm {
namespace trace {
namespace {

// How many differing collectives are listed per group.
constexpr size_t kMaxDifferences = 5;

struct Op {
  int64_t seq = -1;
  std::string state;  // queued, started, completed, failed
  std::string describe;
  std::optional<OpFingerprint> fingerprint;
  int64_t queued_ns = 0;  // when the rank issued it (wall clock, as every dump's times)
  int64_t ended_ns = 0;
  std::string error;
};

// Dumps of different machines compare wall clocks that may differ by this much: an op
// issued on another machine counts as issued after a failure only when this much later.
constexpr int64_t kOtherHostClockSlackNs = 1'000'000'000;

// A rank's error quoted inside one line (the launchers' summaries): its first line. A
// first line that only introduces the lines after it (a Desync's "Each rank's op there:",
// cut off by the launcher's record, which keeps one line) loses that introduction and
// says the rest is elsewhere, rather than end on a colon.
std::string one_line(const std::string& text) {
  std::string s = text.substr(0, text.find('\n'));
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.pop_back();
  if (s.empty() || s.back() != ':') return s;
  const size_t sentence = s.rfind(". ");
  s = sentence == std::string::npos ? s.substr(0, s.size() - 1) : s.substr(0, sentence + 1);
  return s + " (more lines in the rank's error: its output, or the first failure below)";
}

// One rank's view of one group: its collectives by sequence number.
struct RankView {
  int global_rank = -1;
  std::string host;
  std::map<int64_t, Op> ops;
  // Sends and receives not completed, oldest first: a rank that waits in one issues no
  // collective, and "nothing issued since" would hide why.
  std::vector<Op> open_p2p;
};

// "recv p2p#0 float32[8] from 0 tag 42 (transfer 0) (started)", and how many more.
std::string open_p2p_text(const RankView& rv) {
  if (rv.open_p2p.empty()) return "";
  const Op& oldest = rv.open_p2p.front();
  std::string s = oldest.describe + " (" + oldest.state + ")";
  if (rv.open_p2p.size() > 1) s += " and " + std::to_string(rv.open_p2p.size() - 1) + " more point-to-point";
  return s;
}

struct GroupView {
  int size = 0;
  std::string backend;
  std::vector<int64_t> global_ranks;  // by group rank, as a dump says
  std::map<int, RankView> by_rank;  // group rank -> its view
};

// What the launchers (launcher_node<N>.json, every machine's) say of a world rank that ended on its own by a signal
// or failed without being stopped: "died (signal SIGKILL, seen by the launcher)"; "" when
// it says nothing of it.
using LauncherDeaths = std::map<int, std::string>;

LauncherDeaths launcher_deaths(const DumpFolder* folder) {
  LauncherDeaths out;
  if (folder == nullptr) return out;
  for (const JsonValue& l : folder->launchers) for (const JsonValue& r : l["ranks"].items) {
    if (r["stopped_by_launcher"].boolean || !r["failed"].boolean) continue;
    const int rank = static_cast<int>(r.integer("rank", -1));
    const std::string sig = r.str("signal");
    std::string text = sig.empty() ? "failed (" + r.str("ended") + ", seen by the launcher)"
                                   : "died (signal " + sig + ", seen by the launcher)";
    if (!r.str("error").empty()) text += ": " + one_line(r.str("error"));
    out.emplace(rank, text);  // the first process of the rank that failed
  }
  return out;
}

std::string clock_text(int64_t ns);

// What the launchers (launcher_node<N>.json) say of a world rank they saw stopped by job
// control (SIGSTOP, SIGTSTP) when they began stopping the job ("job_control_stop"): the
// rank was frozen, not busy in the program -- a fact, where the dumps' times only suggest
// it. "stopped (SIGSTOP/frozen) per the launcher, for at least 23.0 s (seen so from
// 10:00:01.000 UTC to 10:00:24.000 UTC)".
using LauncherStops = std::map<int, std::string>;

LauncherStops launcher_stops(const DumpFolder* folder) {
  LauncherStops out;
  if (folder == nullptr) return out;
  for (const JsonValue& l : folder->launchers) for (const JsonValue& r : l["ranks"].items) {
    const JsonValue& stop = r["job_control_stop"];
    if (!stop.is_object()) continue;
    const int64_t since = stop.integer("since_ns"), seen = stop.integer("seen_ns");
    char took[32];
    std::snprintf(took, sizeof(took), "%.1f s", static_cast<double>(seen - since) / 1e9);
    out.emplace(static_cast<int>(r.integer("rank", -1)),
                std::string("stopped (SIGSTOP/frozen) per the launcher, for at least ") + took + " (seen so from " +
                    clock_text(since) + " to " + clock_text(seen) + ")");
  }
  return out;
}

std::string clock_text(int64_t ns) {
  const time_t secs = static_cast<time_t>(ns / 1000000000);
  tm parts;
  gmtime_r(&secs, &parts);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%02d:%02d:%02d.%03d UTC", parts.tm_hour, parts.tm_min, parts.tm_sec,
                static_cast<int>(ns / 1000000 % 1000));
  return buf;
}

std::string op_text(const Op& op) {
  std::string s = op.describe + " (" + op.state;
  return s + ")";
}

std::map<std::string, GroupView> collect(const std::vector<RankDump>& dumps) {
  std::map<std::string, GroupView> groups;
  for (const RankDump& d : dumps) {
    for (const JsonValue& g : d.doc["groups"].items) {
      GroupView& view = groups[g.str("name")];
      view.size = static_cast<int>(g.integer("size"));
      view.backend = g.str("backend");
      if (view.global_ranks.empty()) {
        for (const JsonValue& r : g["global_ranks"].items) view.global_ranks.push_back(std::stoll(r.text));
      }
      RankView& rv = view.by_rank[static_cast<int>(g.integer("rank"))];
      rv.global_rank = static_cast<int>(d.doc.integer("rank", -1));
      rv.host = d.doc.str("host");
      for (const JsonValue& o : g["ops"].items) {
        Op op;
        op.seq = o.integer("seq");
        op.state = o.str("state");
        op.describe = o.str("describe");
        op.queued_ns = o.integer("queued_ns", o.integer("started_ns"));
        op.ended_ns = o.integer("ended_ns");
        op.error = o.str("error");
        if (o.str("kind") != "collective") {  // p2p pairs are not in one order: only what waits
          if (op.state != "completed") rv.open_p2p.push_back(op);
          continue;
        }
        op.fingerprint = OpFingerprint::decode(o.str("fingerprint"));
        rv.ops[op.seq] = op;
      }
    }
  }
  return groups;
}

const Op* last_in(const RankView& rv, const std::set<std::string>& states) {
  for (auto it = rv.ops.rbegin(); it != rv.ops.rend(); ++it) {
    if (states.count(it->second.state)) return &it->second;
  }
  return nullptr;
}

// A collective's issue times that differ by this much, with no op failed in it, name the
// ranks that issued it last as behind: ranks of a step issue a collective within
// milliseconds of each other, a rank stopped (SIGSTOP) or stuck in the program seconds later.
constexpr int64_t kLateIssueNs = 2'000'000'000;

struct LateIssuers {
  std::set<int> ranks;        // group ranks
  int64_t gap_ns = 0;         // between the others' last issue and their first
  int64_t others_last_ns = 0;
};

// The ranks, fewer than half of those that issued the op, whose issue times (queued_ns)
// come after the widest gap between successive issue times, when that gap is at least
// kLateIssueNs (and the clocks' slack more across machines); none when an op failed in it
// (the caller's "only after ... had failed" covers that).
LateIssuers late_issuers_in(const GroupView& g, const std::map<int, const Op*>& issued) {
  LateIssuers out;
  std::vector<std::pair<int64_t, int>> times;  // queued_ns, group rank
  std::set<std::string> hosts;
  for (const auto& [rank, op] : issued) {
    if (op->state == "failed") return out;
    if (op->queued_ns <= 0) continue;
    times.emplace_back(op->queued_ns, rank);
    hosts.insert(g.by_rank.at(rank).host);
  }
  if (times.size() < 2) return out;
  std::sort(times.begin(), times.end());
  size_t cut = 0;  // the first late rank's index
  int64_t widest = 0;
  for (size_t i = 1; i < times.size(); ++i) {
    if (times[i].first - times[i - 1].first > widest) {
      widest = times[i].first - times[i - 1].first;
      cut = i;
    }
  }
  const int64_t needed = kLateIssueNs + (hosts.size() > 1 ? kOtherHostClockSlackNs : 0);
  if (widest < needed || 2 * (times.size() - cut) >= times.size()) return out;
  for (size_t i = cut; i < times.size(); ++i) out.ranks.insert(times[i].second);
  out.gap_ns = widest;
  out.others_last_ns = times[cut - 1].first;
  return out;
}

// verdict: where the group stands, for what its levels carry up (level_summary.h).
void report_group(std::ostringstream& out, const std::string& name, const GroupView& g, const LauncherDeaths& deaths,
                  const LauncherStops& stops, GroupVerdict* verdict) {
  for (int64_t w : g.global_ranks) verdict->global_ranks.push_back(w);
  // A group rank's world rank, as the dumps name it.
  auto world_rank = [&](int r) {
    return static_cast<size_t>(r) < g.global_ranks.size() ? static_cast<int>(g.global_ranks[static_cast<size_t>(r)]) : r;
  };
  auto rank_name = [&](int r) {
    return "rank " + std::to_string(r) + (world_rank(r) != r ? " (world rank " + std::to_string(world_rank(r)) + ")" : "");
  };
  // Why a rank was late: what the launcher saw, else the guess the times allow.
  auto late_text = [&](int r) {
    auto it = stops.find(world_rank(r));
    return it != stops.end() ? "late: " + it->second : std::string("late (stopped, or busy in the program)");
  };
  out << "group '" << name << "' (" << g.size << " ranks, " << g.backend << ")\n";
  std::vector<int> missing;
  for (int r = 0; r < g.size; ++r) {
    if (!g.by_rank.count(r)) missing.push_back(r);
  }
  for (const auto& [rank, rv] : g.by_rank) {
    const Op* done = last_in(rv, {"completed"});
    const Op* started = last_in(rv, {"started", "queued", "failed"});
    out << "  rank " << rank;
    if (rv.global_rank != rank) out << " (world rank " << rv.global_rank << ")";
    out << ": last completed " << (done ? done->describe : std::string("nothing"));
    const bool issued = started && (!done || started->seq > done->seq);
    if (issued) {
      out << "; then " << op_text(*started);
    } else {
      out << "; no collective issued since";
    }
    if (!rv.open_p2p.empty()) out << "; point-to-point not finished: " << open_p2p_text(rv);
    out << "\n";
  }
  if (!missing.empty()) out << "  no dump from ranks " << rank_list_text(missing) << "\n";
  verdict->ranks_missing = !missing.empty();
  // The ranks without a dump that the launcher saw die or fail on their own.
  std::vector<std::string> dead;
  for (int r : missing) {
    auto it = deaths.find(world_rank(r));
    if (it != deaths.end()) {
      dead.push_back(rank_name(r) + " " + it->second);
      out << "    " << dead.back() << "\n";
    }
  }

  // Where the group stands: the first collective not every rank (with a dump) completed.
  std::set<int64_t> seqs;
  for (const auto& [rank, rv] : g.by_rank) {
    for (const auto& [seq, op] : rv.ops) seqs.insert(seq);
  }
  bool stuck = false;
  for (int64_t seq : seqs) {
    std::vector<int> absent, waiting, failed;
    std::map<int, const Op*> issued;  // group rank -> its op of this number
    bool everyone_done = true;
    for (const auto& [rank, rv] : g.by_rank) {
      auto it = rv.ops.find(seq);
      if (it == rv.ops.end()) {
        // Older than what the rank's ring holds is not "absent".
        if (rv.ops.empty() || seq > rv.ops.rbegin()->first) absent.push_back(rank);
        if (!rv.ops.empty() && seq > rv.ops.rbegin()->first) everyone_done = false;
        continue;
      }
      if (it->second.state != "completed") everyone_done = false;
      issued[rank] = &it->second;
    }
    if (everyone_done) continue;
    stuck = true;
    // A rank that issued the op only after others had failed in it (stopped, or busy in the
    // program, while they timed out; the launcher's SIGCONT with its SIGTERM let it run on)
    // did not take part in time: it is behind, not waiting. Its own op ended as the aborted
    // group's would, and does not count as failed in it either.
    std::map<int, std::vector<int>> late;  // rank -> the ranks that had failed before it issued the op
    for (const auto& [rank, op] : issued) {
      for (const auto& [other, other_op] : issued) {
        if (other == rank || other_op->state != "failed" || other_op->ended_ns <= 0 || op->queued_ns <= 0) continue;
        const bool same_host = g.by_rank.at(rank).host == g.by_rank.at(other).host;
        if (op->queued_ns > other_op->ended_ns + (same_host ? 0 : kOtherHostClockSlackNs)) late[rank].push_back(other);
      }
    }
    // With no op failed in it (a hang the launcher stopped): the ranks that issued it last
    // by far, after a pause none of the others took (a rank SIGSTOPped there, then let run
    // on by the launcher's SIGCONT and SIGTERM, issued it some 20 s after them). Before,
    // every rank was listed as waiting and none named.
    const LateIssuers late_issuers = late_issuers_in(g, issued);
    for (const auto& [rank, op] : issued) {
      if (late.count(rank) || late_issuers.ranks.count(rank)) continue;
      if (op->state == "failed") failed.push_back(rank);
      else if (op->state != "completed") waiting.push_back(rank);
    }
    // The op the heading names: the one most ranks issued (a root, count or dtype that one
    // rank got wrong is that rank's, not the group's); the lowest rank's among equals.
    std::map<std::string, std::vector<int>> by_describe;
    for (const auto& [rank, op] : issued) by_describe[op->describe].push_back(rank);
    std::string what = "collective #" + std::to_string(seq);
    const std::vector<int>* most = nullptr;
    for (const auto& [describe, ranks] : by_describe) {
      if (!most || ranks.size() > most->size() || (ranks.size() == most->size() && ranks[0] < (*most)[0])) {
        most = &ranks;
        what = describe;
      }
    }
    out << "  stuck at " << what;
    if (by_describe.size() > 1) {
      out << " (as ranks " << rank_list_text(*most) << " issued it; they differ:";
      bool first_other = true;
      for (const auto& [describe, ranks] : by_describe) {
        if (describe == what) continue;
        out << (first_other ? " " : ", ") << (ranks.size() == 1 ? "rank " + std::to_string(ranks[0]) : "ranks " + rank_list_text(ranks))
            << " issued " << describe;
        first_other = false;
      }
      out << ")";
    }
    out << ":\n";
    for (const auto& [rank, before] : late) {
      out << "    behind: rank " << rank << " issued " << issued.at(rank)->describe << " only after "
          << (before.size() == 1 ? "rank " + std::to_string(before[0]) : "ranks " + rank_list_text(before))
          << " had failed in it: it was " << late_text(rank) << "\n";
    }
    if (!late_issuers.ranks.empty()) {
      const std::vector<int> ranks(late_issuers.ranks.begin(), late_issuers.ranks.end());
      char gap[32];
      std::snprintf(gap, sizeof(gap), "%.1f s", static_cast<double>(late_issuers.gap_ns) / 1e9);
      out << "    behind: " << (ranks.size() == 1 ? "rank " + std::to_string(ranks[0]) : "ranks " + rank_list_text(ranks))
          << " issued " << issued.at(ranks[0])->describe << " " << gap << " after the other ranks (the last of them at "
          << clock_text(late_issuers.others_last_ns) << "; " << (ranks.size() == 1 ? "it" : "they") << " at "
          << clock_text(issued.at(ranks[0])->queued_ns)
          << "): likely the cause, " << late_text(ranks[0]) << " while the others waited\n";
      for (size_t i = 1; i < ranks.size(); ++i) {
        if (stops.count(world_rank(ranks[i]))) out << "    " << rank_name(ranks[i]) << " was " << late_text(ranks[i]) << "\n";
      }
    }
    if (!absent.empty()) {
      out << "    behind: " << (absent.size() == 1 ? "rank " + std::to_string(absent[0]) : "ranks " + rank_list_text(absent))
          << " never issued " << what << "\n";
      for (int rank : absent) {
        const RankView& rv = g.by_rank.at(rank);
        if (!rv.open_p2p.empty()) out << "    rank " << rank << "'s point-to-point not finished: " << open_p2p_text(rv) << "\n";
      }
    }
    // The ranks the launcher saw stopped that the times above do not name (they never
    // issued the op, or left no dump): said plainly, as the likely cause of the hang.
    for (const auto& [world, text] : stops) {
      int r = -1;
      for (int k = 0; k < g.size; ++k) {
        if (world_rank(k) == world) r = k;
      }
      if (r < 0 || late.count(r) || late_issuers.ranks.count(r)) continue;
      out << "    " << rank_name(r) << " was " << text << ": likely the cause\n";
    }
    if (!waiting.empty()) out << "    waiting in it: ranks " << rank_list_text(waiting) << "\n";
    for (const std::string& d : dead) {
      if (!waiting.empty()) out << "    " << d << " while ranks " << rank_list_text(waiting) << " waited in " << what << "\n";
    }
    if (!failed.empty()) out << "    failed in it: ranks " << rank_list_text(failed) << "\n";
    verdict->stuck = true;
    verdict->what = what;
    for (const auto& [rank, before] : late) verdict->behind.insert(rank);
    verdict->behind.insert(late_issuers.ranks.begin(), late_issuers.ranks.end());
    verdict->behind.insert(absent.begin(), absent.end());
    for (const auto& [rank, op] : issued) {
      if (op->state != "failed") continue;
      for (int r : silent_ranks_in(op->error)) {
        if (r >= 0 && r < g.size && r != rank) verdict->silent.insert(r);
      }
    }
    break;
  }
  if (!stuck) {
    out << "  every rank completed every collective it recorded"
        << (dead.empty() ? "" : " (but " + std::to_string(dead.size()) + (dead.size() == 1 ? " rank" : " ranks") +
                                     " of the group died: above)")
        << "\n";
  }

  // Fingerprints of one sequence number that differ between ranks.
  size_t listed = 0;
  for (int64_t seq : seqs) {
    std::vector<std::optional<OpFingerprint>> by_rank(static_cast<size_t>(g.size));
    std::optional<OpFingerprint> first;
    bool differ = false;
    for (const auto& [rank, rv] : g.by_rank) {
      auto it = rv.ops.find(seq);
      if (it == rv.ops.end() || !it->second.fingerprint || rank >= g.size) continue;
      by_rank[static_cast<size_t>(rank)] = it->second.fingerprint;
      if (!first) first = it->second.fingerprint;
      else if (!first->differences(*it->second.fingerprint).empty()) differ = true;
    }
    if (!differ) continue;
    if (listed++ == kMaxDifferences) {
      out << "  (more collectives differ)\n";
      break;
    }
    out << "  collective #" << seq << " differs between ranks:\n";
    std::istringstream table(fingerprint_table(by_rank, "(not recorded)"));
    for (std::string line; std::getline(table, line);) out << "    " << line << "\n";
  }
}

}  // namespace

DumpFolder load_dump_folder(const std::string& dir) { return load_dump_folders({dir}); }

DumpFolder load_dump_folders(const std::vector<std::string>& dirs) {
  // Names as "<dir>/<file>": a job over several machines writes a folder on each
  // (tools/launch --trace_dir on every node), read here as one.
  std::vector<std::string> names;
  std::vector<std::string> records;  // launcher_node<N>.json, launcher.json
  std::string dir;                   // the folders, for messages
  for (const std::string& one : dirs) {
    dir += (dir.empty() ? "" : ", ") + one;
    DIR* d = ::opendir(one.c_str());
    if (!d) throw std::runtime_error("trace analyze: cannot open folder " + one);
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if ((n.rfind("rank_", 0) == 0 || n.rfind("pid_", 0) == 0) && n.size() > 5 && n.substr(n.size() - 5) == ".json") {
        names.push_back(one + "/" + n);
      }
      if (n == "launcher.json" || (n.rfind("launcher_node", 0) == 0 && n.size() > 18 &&
                                   n.find_first_not_of("0123456789", 13) == n.size() - 5 &&
                                   n.substr(n.size() - 5) == ".json")) {
        records.push_back(one + "/" + n);
      }
    }
    ::closedir(d);
  }
  if (names.empty() && records.empty()) throw std::runtime_error("trace analyze: no dumps (rank_<R>.json) in " + dir);
  std::sort(names.begin(), names.end());
  // A file's name as the report gives it: its folder only when there are several.
  auto shown = [&](const std::string& path) { return dirs.size() > 1 ? path : path.substr(path.rfind('/') + 1); };
  // One unreadable file does not hide the others: a job of 96 ranks with one broken dump
  // was not analysed at all. Each is named with why, and its rank counts as without a dump.
  DumpFolder folder;
  auto read = [&](const std::string& path, const std::string& format, const std::string& what) -> std::optional<JsonValue> {
    const std::string n = shown(path);
    try {
      JsonValue doc = parse_json_file(path);
      if (doc.str("format") == format) return doc;
      folder.unreadable.push_back(n + ": not a " + what);
    } catch (const std::exception& e) {
      std::string why = e.what();
      if (why.rfind(path + ": ", 0) == 0) why = why.substr(path.size() + 2);  // the name is said once
      folder.unreadable.push_back(n + ": " + why);
    }
    return std::nullopt;
  };
  std::vector<RankDump> all;
  for (const std::string& n : names) {
    if (std::optional<JsonValue> doc = read(n, "distcomm-trace-dump", "distcomm trace dump")) {
      all.push_back(RankDump{n, std::move(*doc)});
    }
  }
  std::vector<std::pair<std::string, JsonValue>> launchers;  // file name, record
  for (const std::string& n : records) {
    if (std::optional<JsonValue> doc = read(n, "distcomm-launcher-record", "distcomm launcher record")) {
      launchers.emplace_back(n, std::move(*doc));
    }
  }
  if (all.empty() && launchers.empty()) {
    std::string whys;
    for (const std::string& u : folder.unreadable) whys += (whys.empty() ? "" : "; ") + u;
    throw std::runtime_error("trace analyze: nothing readable in " + dir + ": " + whys);
  }
  // The jobs in the folder, by run id (DISTCOMM_RUN_ID; "" in dumps of programs run without
  // one, and of ranks whose distcomm predates the run id), each with the time of its
  // newest dump. The launchers' records only where there is no dump: ranks of an older distcomm
  // under a newer launcher write none, and their dumps are still the job's.
  std::map<std::string, int64_t> newest;
  for (const RankDump& r : all) {
    int64_t& t = newest[r.doc.str("run_id")];
    t = std::max(t, r.doc.integer("time_ns"));
  }
  if (all.empty()) {
    for (const auto& [n, l] : launchers) {
      int64_t& t = newest[l.str("run_id")];
      t = std::max(t, l.integer("time_ns"));
    }
  }
  std::string run;
  int64_t run_time = -1;
  for (const auto& [id, t] : newest) {
    if (t > run_time) {
      run = id;
      run_time = t;
    } else if (t == run_time) {
      throw std::runtime_error("trace analyze: " + dir + " holds the dumps of several jobs (run ids '" + run +
                               "' and '" + id + "') written at the same time: which is the newest cannot be told; "
                               "move one job's files elsewhere");
    }
  }
  auto run_text = [](const std::string& id) { return id.empty() ? std::string("no run id") : "run " + id; };
  folder.run_id = run;
  for (RankDump& r : all) {
    const std::string id = r.doc.str("run_id");
    if (id == run) {
      folder.dumps.push_back(std::move(r));
      continue;
    }
    folder.left_out.push_back(shown(r.path) + " (" + run_text(id) + ", written at " +
                              clock_text(r.doc.integer("time_ns")) + ": an earlier job's dump)");
  }
  for (auto& [n, launcher] : launchers) {
    // Dumps without a run id: a launcher's record is taken as theirs when it was written
    // after them (a launcher writes it once its ranks have ended; it moves an earlier job's
    // dumps aside before the job starts).
    const bool theirs = launcher.str("run_id") == run || (run.empty() && launcher.integer("time_ns") >= run_time);
    if (theirs) {
      folder.launchers.push_back(std::move(launcher));
    } else {
      folder.left_out.push_back(shown(n) + " (" + run_text(launcher.str("run_id")) + ", written at " +
                                clock_text(launcher.integer("time_ns")) + ": an earlier job's)");
    }
  }
  std::stable_sort(folder.launchers.begin(), folder.launchers.end(), [](const JsonValue& a, const JsonValue& b) {
    return a.integer("node_rank") < b.integer("node_rank");
  });
  std::sort(folder.dumps.begin(), folder.dumps.end(), [](const RankDump& a, const RankDump& b) {
    const int64_t ra = a.doc.integer("rank"), rb = b.doc.integer("rank");
    return ra != rb ? ra < rb : a.doc.integer("time_ns") > b.doc.integer("time_ns");
  });
  // One rank's dump in two of the folders given (a folder given twice, a copy): the newest
  // holds the most; two of one rank would count its ops twice.
  std::vector<RankDump> kept;
  for (RankDump& r : folder.dumps) {
    const int64_t rank = r.doc.integer("rank", -1);
    if (rank >= 0 && !kept.empty() && kept.back().doc.integer("rank", -1) == rank) {
      folder.left_out.push_back(shown(r.path) + " (rank " + std::to_string(rank) + " again, written at " +
                                clock_text(r.doc.integer("time_ns")) + ": " + shown(kept.back().path) + " is newer)");
      continue;
    }
    kept.push_back(std::move(r));
  }
  folder.dumps = std::move(kept);
  return folder;
}

std::vector<RankDump> load_dumps(const std::string& dir) { return load_dump_folder(dir).dumps; }

std::string analyze_dumps(const std::vector<RankDump>& dumps) {
  DumpFolder folder;
  folder.dumps = dumps;
  return analyze_folder(folder);
}

std::string analyze_folder(const DumpFolder& folder) {
  const std::vector<RankDump>& dumps = folder.dumps;
  const LauncherDeaths deaths = launcher_deaths(&folder);
  const LauncherStops stops = launcher_stops(&folder);
  std::ostringstream out;
  for (const std::string& f : folder.unreadable) out << "unreadable, left out: " << f << "\n";
  for (const std::string& f : folder.left_out) out << "left out " << f << "\n";
  if (!folder.left_out.empty()) {
    out << "analysed: " << (folder.run_id.empty() ? std::string("the files with no run id") : "run " + folder.run_id)
        << ", the newest job in the folder\n";
  }
  out << dumps.size() << (dumps.size() == 1 ? " dump:" : " dumps:");
  if (dumps.empty()) out << " none";
  for (const RankDump& d : dumps) {
    out << " rank " << d.doc.integer("rank", -1) << " (" << d.doc.str("host") << " pid " << d.doc.integer("pid")
        << ", " << d.doc.str("reason") << ")";
    if (&d != &dumps.back()) out << ",";
  }
  out << "\n";
  // Each group's section, then what its levels (a group by hosts) show of it: the culprits
  // of a frozen or cut-off host are seen only there.
  const std::map<std::string, GroupView> groups = collect(dumps);
  std::map<std::string, GroupVerdict> verdicts;
  std::map<std::string, std::string> sections;
  for (const auto& [name, g] : groups) {
    std::ostringstream section;
    report_group(section, name, g, deaths, stops, &verdicts[name]);
    sections[name] = section.str();
  }
  for (const auto& [name, text] : sections) out << text << levels_summary(name, verdicts);
  // What the launchers saw (launcher_node<N>.json, one per machine): how the ranks ended,
  // which one failed first. One machine's as "launcher: ...", several as "launcher of node N: ...".
  for (const JsonValue& l : folder.launchers) {
    const std::string who = folder.launchers.size() == 1 ? "launcher" : "launcher of node " + std::to_string(l.integer("node_rank"));
    std::vector<int> stopped;
    std::vector<std::string> died;
    for (const JsonValue& r : l["ranks"].items) {
      const int rank = static_cast<int>(r.integer("rank", -1));
      if (r["stopped_by_launcher"].boolean) stopped.push_back(rank);
      if (!r["stopped_by_launcher"].boolean && r["failed"].boolean) {
        auto it = deaths.find(rank);
        if (it != deaths.end()) died.push_back("rank " + std::to_string(rank) + " " + it->second);
      }
    }
    out << who << ": exit code " << l.integer("exit_code");
    if (!l.str("interrupted_by").empty()) out << ", interrupted by " << l.str("interrupted_by");
    for (const std::string& d : died) out << "; " << d;
    for (const JsonValue& r : l["ranks"].items) {
      auto it = stops.find(static_cast<int>(r.integer("rank", -1)));
      if (r["job_control_stop"].is_object() && it != stops.end()) out << "; rank " << it->first << " was " << it->second;
    }
    if (!stopped.empty()) out << "; stopped by the launcher: ranks " << rank_list_text(stopped);
    out << "\n";
    const JsonValue& first = l["first_failure"];
    if (first.is_object()) out << who << "'s first failure: " << one_line(first.str("failure")) << "\n";
  }

  // The first failure by time, over every rank and group; an op another rank's failure cut
  // off (the core's words for an adopted failure) only where no rank failed on its own: it
  // ends during the finder's abort, before the finder's own op is marked failed.
  const JsonValue* first = nullptr;
  bool first_adopted = true;
  int first_rank = -1;
  std::string first_group;
  for (const RankDump& d : dumps) {
    for (const JsonValue& g : d.doc["groups"].items) {
      for (const JsonValue& o : g["ops"].items) {
        if (o.str("state") != "failed") continue;
        const bool adopted = o.str("error").find(kCutThisOpOff) != std::string::npos;
        if (!first || (first_adopted && !adopted) ||
            (adopted == first_adopted && o.integer("ended_ns") < first->integer("ended_ns"))) {
          first_adopted = adopted;
          first = &o;
          first_rank = static_cast<int>(d.doc.integer("rank", -1));
          first_group = g.str("name");
        }
      }
    }
  }
  if (first) {
    out << "first failure: rank " << first_rank << " group '" << first_group << "' " << first->str("describe")
        << " at " << clock_text(first->integer("ended_ns")) << ": " << first->str("error") << "\n";
  } else {
    out << "no op failed\n";
  }
  return out.str();
}

}  // namespace trace
}  // namespace distcomm
