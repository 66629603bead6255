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
  int64_t ended_ns = 0;
  std::string error;
};

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
  std::map<int, RankView> by_rank;  // group rank -> its view
};

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
      RankView& rv = view.by_rank[static_cast<int>(g.integer("rank"))];
      rv.global_rank = static_cast<int>(d.doc.integer("rank", -1));
      rv.host = d.doc.str("host");
      for (const JsonValue& o : g["ops"].items) {
        Op op;
        op.seq = o.integer("seq");
        op.state = o.str("state");
        op.describe = o.str("describe");
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

void report_group(std::ostringstream& out, const std::string& name, const GroupView& g) {
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

  // Where the group stands: the first collective not every rank (with a dump) completed.
  std::set<int64_t> seqs;
  for (const auto& [rank, rv] : g.by_rank) {
    for (const auto& [seq, op] : rv.ops) seqs.insert(seq);
  }
  bool stuck = false;
  for (int64_t seq : seqs) {
    std::vector<int> absent, waiting, failed;
    const Op* example = nullptr;
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
      if (!example || it->second.state != "completed") example = &it->second;
      if (it->second.state == "failed") failed.push_back(rank);
      else if (it->second.state != "completed") waiting.push_back(rank);
    }
    if (everyone_done) continue;
    stuck = true;
    const std::string what = example ? example->describe : "collective #" + std::to_string(seq);
    out << "  stuck at " << what << ":\n";
    if (!absent.empty()) {
      out << "    behind: " << (absent.size() == 1 ? "rank " + std::to_string(absent[0]) : "ranks " + rank_list_text(absent))
          << " never issued " << what << "\n";
      for (int rank : absent) {
        const RankView& rv = g.by_rank.at(rank);
        if (!rv.open_p2p.empty()) out << "    rank " << rank << "'s point-to-point not finished: " << open_p2p_text(rv) << "\n";
      }
    }
    if (!waiting.empty()) out << "    waiting in it: ranks " << rank_list_text(waiting) << "\n";
    if (!failed.empty()) out << "    failed in it: ranks " << rank_list_text(failed) << "\n";
    break;
  }
  if (!stuck) out << "  every rank completed every collective it recorded\n";

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

std::vector<RankDump> load_dumps(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) throw std::runtime_error("trace analyze: cannot open folder " + dir);
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if ((n.rfind("rank_", 0) == 0 || n.rfind("pid_", 0) == 0) && n.size() > 5 && n.substr(n.size() - 5) == ".json") {
      names.push_back(n);
    }
  }
  ::closedir(d);
  if (names.empty()) throw std::runtime_error("trace analyze: no dumps (rank_<R>.json) in " + dir);
  std::sort(names.begin(), names.end());
  std::vector<RankDump> dumps;
  for (const std::string& n : names) {
    RankDump r;
    r.path = dir + "/" + n;
    r.doc = parse_json_file(r.path);
    if (r.doc.str("format") != "distcomm-trace-dump") {
      throw std::runtime_error("trace analyze: " + r.path + " is not a distcomm trace dump");
    }
    dumps.push_back(std::move(r));
  }
  std::sort(dumps.begin(), dumps.end(),
            [](const RankDump& a, const RankDump& b) { return a.doc.integer("rank") < b.doc.integer("rank"); });
  return dumps;
}

std::string analyze_dumps(const std::vector<RankDump>& dumps) {
  std::ostringstream out;
  out << dumps.size() << (dumps.size() == 1 ? " dump:" : " dumps:");
  for (const RankDump& d : dumps) {
    out << " rank " << d.doc.integer("rank", -1) << " (" << d.doc.str("host") << " pid " << d.doc.integer("pid")
        << ", " << d.doc.str("reason") << ")";
    if (&d != &dumps.back()) out << ",";
  }
  out << "\n";
  for (const auto& [name, g] : collect(dumps)) report_group(out, name, g);

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
