// `trace analyze` of a group by hosts (hier: levels 'world/hier_host<N>' and
// 'world/hier_local<L>'): the culprits only the levels saw are named in the group's own
// section, in its ranks, with their host. An outside user's 4 hosts x 4 ranks, one host
// frozen, read only "stuck at all_reduce #32: failed in it: ranks [0-15]" for 'world', the
// frozen host's ranks only as "behind: rank 2" in each 'world/hier_local<L>'.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tools/trace/dump_analysis.h"
#include "tools/trace/level_summary.h"

namespace distcomm {
namespace trace {
namespace {

constexpr int64_t kT0 = 1'796'550'000LL * 1'000'000'000LL;

struct LevelOp {
  std::string group;  // "world", "world/hier_local0", ...
  int rank;           // in that group
  std::vector<int> global_ranks;
  int seq;
  std::string state;
  std::string describe;
  std::string error;
};

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// One rank's dump: its groups, each with its ops (seq 1 completed everywhere first).
std::string dump(int rank, const std::vector<LevelOp>& ops) {
  std::string groups;
  for (const LevelOp& op : ops) {
    std::string list;
    for (int g : op.global_ranks) list += (list.empty() ? "" : ",") + std::to_string(g);
    auto one = [&](int seq, const std::string& state, const std::string& describe, const std::string& error) {
      return "{\"id\":" + std::to_string(seq) + ",\"op\":\"x\",\"seq\":" + std::to_string(seq) +
             ",\"kind\":\"collective\",\"state\":" + quote(state) + ",\"queued_ns\":" + std::to_string(kT0 + seq) +
             ",\"started_ns\":" + std::to_string(kT0 + seq) + ",\"ended_ns\":" +
             std::to_string(state == "started" ? 0 : kT0 + 20'000'000'000LL) + ",\"describe\":" + quote(describe) +
             (error.empty() ? "" : ",\"error\":" + quote(error)) + "}";
    };
    std::string o = one(1, "completed", "all_reduce #1 float32[4] sum", "");
    if (op.seq > 1) o += "," + one(op.seq, op.state, op.describe, op.error);
    groups += std::string(groups.empty() ? "" : ",") + "{\"name\":" + quote(op.group) + ",\"rank\":" +
              std::to_string(op.rank) + ",\"size\":" + std::to_string(op.global_ranks.size()) +
              ",\"global_ranks\":[" + list + "],\"backend\":\"x\",\"ops\":[" + o + "]}";
  }
  return "{\"format\":\"distcomm-trace-dump\",\"version\":1,\"rank\":" + std::to_string(rank) +
         ",\"run_id\":\"r1\",\"host\":\"h" + std::to_string(rank / 2) + "\",\"pid\":" + std::to_string(100 + rank) +
         ",\"reason\":\"exit\",\"time_ns\":" + std::to_string(kT0 + 30'000'000'000LL) + ",\"groups\":[" + groups +
         "]}\n";
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  ASSERT_TRUE(f.good()) << path;
}

std::string fresh_dir(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

const char kWorldOp[] = "all_reduce #2 float32[1048576] sum";
const char kLocalOp[] = "all_reduce #2 float32[262144] sum";

// 2 hosts x 2 ranks, world ranks 2 and 3 on host 1. Rank r's groups: world, its host's
// level, its local rank's level across hosts.
std::vector<LevelOp> groups_of(int r, const std::string& world_state, const std::string& world_error,
                               const std::string& local_state, int local_seq, const std::string& local_error) {
  const int host = r / 2, local = r % 2;
  return {
      {"world", r, {0, 1, 2, 3}, 2, world_state, kWorldOp, world_error},
      {"world/hier_host" + std::to_string(host), local, {2 * host, 2 * host + 1}, 1, "", "", ""},
      {"world/hier_local" + std::to_string(local), host, {local, local + 2}, local_seq, local_state, kLocalOp, local_error},
  };
}

// Host 1 frozen: its ranks never issued their levels' ops across hosts (only the levels
// know), and every rank's world op failed. Host 0's dumps and host 1's are in a folder each,
// as two machines write them, read as one job.
TEST(LevelSummary, AFrozenHostsRanksAreNamedInTheGroupsOwnSection) {
  const std::string a = fresh_dir("host0"), b = fresh_dir("host1");
  const std::string timed_out = "distcomm::Timeout: did not finish within its timeout";
  for (int r = 0; r < 4; ++r) {
    const bool frozen = r >= 2;
    write_text((frozen ? b : a) + "/rank_" + std::to_string(r) + ".json",
               dump(r, groups_of(r, "failed", timed_out, frozen ? "" : "failed", frozen ? 1 : 2, frozen ? "" : timed_out)));
  }
  const std::string report = analyze_folder(load_dump_folders({a, b}));
  std::fprintf(stderr, "%s", report.c_str());
  EXPECT_NE(report.find("4 dumps:"), std::string::npos) << report;
  const size_t world = report.find("group 'world' ");
  const size_t next = report.find("\ngroup 'world/", world);
  ASSERT_NE(world, std::string::npos) << report;
  const std::string section = report.substr(world, next - world);
  EXPECT_NE(section.find("    behind, as the group's levels show: ranks [2, 3] (all of host 1: group "
                         "'world/hier_host1') never took part in its levels' ops of " +
                         std::string(kWorldOp) + ", as seen by 'world/hier_local0', 'world/hier_local1'"),
            std::string::npos)
      << section;
  EXPECT_NE(section.find("likely the cause"), std::string::npos) << section;
}

// The host's link cut: every rank's op failed everywhere, levels included; only the errors
// say who did not report, in each group's own ranks ("rank 1" of 'world/hier_local0' is
// world rank 2).
TEST(LevelSummary, RanksTheErrorsSayDidNotReportAreNamedInWorldRanks) {
  const std::string dir = fresh_dir("cut");
  for (int r = 0; r < 4; ++r) {
    const std::string local_error =
        r < 2 ? "distcomm::Timeout: rank " + std::to_string(r / 2) + "/2 ...; rank 1 did not report (busy outside distcomm)"
              : "distcomm::Timeout: the others could not be asked";
    write_text(dir + "/rank_" + std::to_string(r) + ".json",
               dump(r, groups_of(r, "failed", "distcomm::Timeout: timed out", "failed", 2, local_error)));
  }
  const std::string report = analyze_folder(load_dump_folder(dir));
  std::fprintf(stderr, "%s", report.c_str());
  EXPECT_NE(report.find("    did not report while the others waited in " + std::string(kWorldOp) +
                        ": ranks [2, 3] (all of host 1: group 'world/hier_host1'), per the errors in "
                        "'world/hier_local0', 'world/hier_local1'"),
            std::string::npos)
      << report;
}

// A rank without a dump (killed) is the cause its section names: the ranks its death held up
// in the levels are not carried up as culprits.
TEST(LevelSummary, NothingIsCarriedUpWhereARankLeftNoDump) {
  const std::string dir = fresh_dir("dead");
  const std::string failed = "distcomm::PeerFailure: rank 3 died";
  for (int r = 0; r < 3; ++r) {
    write_text(dir + "/rank_" + std::to_string(r) + ".json",
               dump(r, groups_of(r, "failed", failed, r == 2 ? "" : "failed", r == 2 ? 1 : 2, r == 2 ? "" : failed)));
  }
  const std::string report = analyze_folder(load_dump_folder(dir));
  EXPECT_NE(report.find("no dump from ranks [3]"), std::string::npos) << report;
  EXPECT_EQ(report.find("as the group's levels show"), std::string::npos) << report;
}

TEST(LevelSummary, SilentRanksAreReadFromAnErrorsWords) {
  EXPECT_EQ(silent_ranks_in("x; rank 2 did not report (busy)"), (std::set<int>{2}));
  EXPECT_EQ(silent_ranks_in("11 ranks [0-5, 7] wait in it too; ranks [8, 9, 10-12] did not report"),
            (std::set<int>{8, 9, 10, 11, 12}));
  EXPECT_TRUE(silent_ranks_in("every rank reported").empty());
  // A number no rank has (an odd error text) is skipped; std::stoi threw out of analyze.
  EXPECT_EQ(silent_ranks_in("rank 99999999999999999999 did not report; rank 3 did not report"), (std::set<int>{3}));
}

}  // namespace
}  // namespace trace
}  // namespace distcomm
