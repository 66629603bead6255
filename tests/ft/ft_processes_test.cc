// Training that goes on when ranks die (issue 28), with real processes: tools/ft_bench's
// in-process run (--runs=ft: 4 ranks of DDP under ft::Manager, a store served by ft_bench
// itself) over gloo and shm, through each fault the issue names:
//
//   rank 0 killed, a middle rank killed, two ranks killed in a row, a kill during the
//   recovery (right after the victim's step was aborted, and once it has arrived at the
//   next generation, while that generation's group is being created), a replacement that
//   joins, and a joiner refused because its state differs (the job goes on).
//
// Each run must end ok with the expected final membership and steps lost, every member's
// parameters identical after every step it committed (a replacement's first step included)
// and at the end, and every member having committed every step once, from its first (0, or
// the step it joined at) to the end. Besides ft_bench's JSON, the test reads the run's event
// logs (tools/ft_bench/event_log.h) itself, so that a report that missed something does
// not pass it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "api/plugin/plugin_registry.h"
#include "tests/testing/require.h"
#include "tests/testing/subprocess.h"

namespace distcomm {
namespace {

using testing::ProgramOutcome;

// Small steps (an MLP 32-32x2-4), each padded to 20 ms so that a job lasts long enough for
// a joiner to come; the default heartbeat timeout (3 s), which bounds a recovery whose
// victim died once it had arrived at the next generation.
constexpr int64_t kSteps = 30;
const std::vector<std::string> kCommon = {"--nproc=4",      "--runs=ft",        "--layers=2",     "--width=32",
                                          "--global_batch=32", "--step_ms=20",  "--heartbeat_timeout_s=3",
                                          "--time_limit_s=90"};
// The members' state, and the refused joiner's (one wider).
const char kMembersState[] = "'mlp 32-32x2-4 f32, sgd'";
const char kJoinerState[] = "'mlp 32-33x2-4 f32, sgd'";

// --- ft_bench's JSON: one flat object (refused_joiner is the one object inside) ---------

// The text of key's value: a string without its quotes (escapes kept), an array or object
// with its brackets, or a bare number / true / false / null. "" when the key is absent.
std::string raw_value(const std::string& json, const std::string& key) {
  const std::string head = "\"" + key + "\": ";
  const size_t at = json.find(head);
  if (at == std::string::npos) return "";
  size_t i = at + head.size();
  if (i >= json.size()) return "";
  if (json[i] == '"') {
    size_t end = i + 1;
    while (end < json.size() && json[end] != '"') end += json[end] == '\\' ? 2 : 1;
    return json.substr(i + 1, end - i - 1);
  }
  if (json[i] == '[' || json[i] == '{') {
    const char close = json[i] == '[' ? ']' : '}';
    return json.substr(i, json.find(close, i) - i + 1);
  }
  return json.substr(i, json.find_first_of(",}", i) - i);
}

std::vector<std::string> string_array(const std::string& text) {
  std::vector<std::string> out;
  for (size_t i = text.find('"'); i != std::string::npos; i = text.find('"', text.find('"', i + 1) + 1)) {
    out.push_back(text.substr(i + 1, text.find('"', i + 1) - i - 1));
  }
  return out;
}

// --- the event logs ---------------------------------------------------------------------

struct Line {
  std::string kind;
  int64_t step = 0;
  std::string rest;  // what follows the step
};

std::vector<Line> read_log(const std::string& dir, const std::string& member) {
  std::vector<Line> out;
  std::istringstream in(testing::read_file(dir + "/" + member + ".log"));
  std::string text;
  while (std::getline(in, text)) {
    std::istringstream fields(text);
    Line l;
    fields >> l.kind >> l.step;
    std::getline(fields, l.rest);
    if (!l.rest.empty() && l.rest[0] == ' ') l.rest.erase(0, 1);
    out.push_back(l);
  }
  return out;
}

struct Expected {
  std::vector<std::string> members;  // the final membership, by id (sorted)
  std::vector<std::string> victims;  // each must have logged its kill
  int64_t steps_lost = 0;
  std::string joiner;                // a replacement that must have taken part ("": none)
  bool refused = false;              // a joiner with another state must have been refused
  int64_t steps = kSteps;            // --steps
};

class FtProcesses : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const PluginInfo& info = load_plugin(GetParam());
    if (!info.available && GetParam() == "gloo") {
      DISTCOMM_SKIP_WITHOUT("gloo") << "the gloo backend cannot run here: " << info.unavailable_reason;
    }
    ASSERT_TRUE(info.available) << GetParam() << ": " << info.unavailable_reason;
  }

  // Runs ft_bench with kCommon, the backend and `flags`, and checks everything above.
  void run_and_check(const std::string& name, const std::vector<std::string>& flags, const Expected& want) {
    const std::string json_path = testing::temp_path(name + "_" + GetParam() + ".json");
    std::vector<std::string> argv = {testing::runfile("tools/ft_bench/ft_bench"), "--backend=" + GetParam(),
                                     "--json=" + json_path, "--steps=" + std::to_string(want.steps)};
    argv.insert(argv.end(), kCommon.begin(), kCommon.end());
    argv.insert(argv.end(), flags.begin(), flags.end());
    std::string command;
    for (const std::string& a : argv) command += " " + a;
    SCOPED_TRACE(name + " over " + GetParam() + ":" + command);
    const auto began = std::chrono::steady_clock::now();
    const ProgramOutcome out = testing::run_program(argv, /*timeout_s=*/150);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    std::printf("[ft_processes] %s over %s: %.2f s\n", name.c_str(), GetParam().c_str(), took);
    ASSERT_EQ(out.exit_code, 0) << out.output;
    ASSERT_NE(out.output.find("ft_bench: done"), std::string::npos) << out.output;
    const std::string json = testing::read_file(json_path);
    ASSERT_FALSE(json.empty()) << "no JSON at " << json_path << "\n" << out.output;
    SCOPED_TRACE(json);

    // The report.
    EXPECT_EQ(raw_value(json, "ok"), "true");
    EXPECT_EQ(raw_value(json, "error"), "");
    EXPECT_EQ(string_array(raw_value(json, "members_final")), want.members) << out.output;
    EXPECT_EQ(raw_value(json, "params_identical"), "true");
    EXPECT_EQ(raw_value(json, "params_identical_every_step"), "true") << raw_value(json, "first_difference");
    EXPECT_EQ(raw_value(json, "every_step_committed"), "true") << raw_value(json, "missed");
    EXPECT_EQ(raw_value(json, "steps_lost"), std::to_string(want.steps_lost));
    EXPECT_EQ(raw_value(json, "kills"), std::to_string(want.victims.size()));
    const int64_t steps = std::stoll("0" + raw_value(json, "steps_committed"));
    if (want.joiner.empty()) {
      EXPECT_EQ(steps, want.steps);
      EXPECT_EQ(raw_value(json, "joined"), "false");
    } else {
      // The members go on past --steps until the replacement has taken part.
      EXPECT_GE(steps, want.steps);
      EXPECT_EQ(raw_value(json, "joined"), "true");
      EXPECT_EQ(raw_value(json, "joined_state_identical"), "true") << raw_value(json, "first_difference");
    }
    if (want.refused) {
      const std::string refused = raw_value(json, "refused_joiner");
      EXPECT_NE(refused.find("\"refused\": true"), std::string::npos) << refused;
      EXPECT_NE(refused.find("\"during_training\": true"), std::string::npos) << refused;
      // Its stderr (ft_bench shows it): one InvalidArgument line naming both states.
      bool named = false;
      for (const std::string& line : testing::lines_of(out.output)) {
        named = named || (line.find("InvalidArgument") != std::string::npos && line.find("refused") != std::string::npos &&
                          line.find(kMembersState) != std::string::npos && line.find(kJoinerState) != std::string::npos);
      }
      EXPECT_TRUE(named) << "no line names both states:\n" << out.output;
    } else {
      EXPECT_EQ(raw_value(json, "refused_joiner"), "null");
    }

    // The event logs, read here.
    const std::string dir = raw_value(json, "log_dir");
    ASSERT_FALSE(dir.empty());
    for (const std::string& victim : want.victims) {
      const std::vector<Line> log = read_log(dir, victim);
      const bool killed = std::any_of(log.begin(), log.end(), [](const Line& l) { return l.kind == "kill"; });
      const bool ended = std::any_of(log.begin(), log.end(), [](const Line& l) { return l.kind == "end"; });
      EXPECT_TRUE(killed && !ended) << victim << " did not die as planned";
    }
    std::map<int64_t, std::set<std::string>> sums;  // step -> every checksum written after it
    std::set<std::string> ends;
    for (const std::string& member : want.members) {
      SCOPED_TRACE(member);
      const std::vector<Line> log = read_log(dir, member);
      int64_t first = 0, end = -1;
      std::vector<int64_t> commits;
      for (const Line& l : log) {
        if (l.kind == "joined") first = l.step;
        if (l.kind == "commit") commits.push_back(l.step);
        if (l.kind == "end") {
          end = l.step;
          ends.insert(l.rest);
        }
      }
      EXPECT_EQ(end, steps);
      std::vector<int64_t> every;
      for (int64_t s = first; s < end; ++s) every.push_back(s);
      EXPECT_EQ(commits, every) << "its commits are not every step from " << first << " to " << end << ", once each";
      if (member == want.joiner) {
        EXPECT_GT(first, 0) << "the replacement logged no joined step";
      }
    }
    for (const std::string& member : want.victims) {
      for (const Line& l : read_log(dir, member)) {
        if (l.kind == "sum") sums[l.step].insert(l.rest);
      }
    }
    for (const std::string& member : want.members) {
      for (const Line& l : read_log(dir, member)) {
        if (l.kind == "sum") sums[l.step].insert(l.rest);
      }
    }
    EXPECT_EQ(ends.size(), 1u) << "the members end with different parameters";
    EXPECT_EQ(static_cast<int64_t>(sums.size()), steps) << "not every step's checksum was logged";
    for (const auto& [step, each] : sums) EXPECT_EQ(each.size(), 1u) << "the parameters differ after step " << step;
    if (!want.joiner.empty()) {
      // It received the others' parameters (before its first step, and before a DDP over
      // the new group copied its rank 0's, which would hide a transfer gone wrong), and
      // its parameters after its first step are the others'.
      const std::vector<Line> log = read_log(dir, want.joiner);
      const auto received = std::find_if(log.begin(), log.end(), [](const Line& l) { return l.kind == "state"; });
      const auto first_sum = std::find_if(log.begin(), log.end(), [](const Line& l) { return l.kind == "sum"; });
      ASSERT_NE(received, log.end()) << "the replacement logged no state";
      ASSERT_NE(first_sum, log.end()) << "the replacement committed no step";
      EXPECT_EQ(first_sum->step, received->step);
      std::map<int64_t, std::string> others;
      for (const Line& l : read_log(dir, "rank0")) {
        if (l.kind == "sum") others[l.step] = l.rest;
      }
      EXPECT_EQ(received->rest, others[received->step - 1]) << "the state it received before step " << received->step;
      EXPECT_EQ(first_sum->rest, others[first_sum->step]) << "after the replacement's first step (" << first_sum->step << ")";
    }
  }
};

TEST_P(FtProcesses, RankZeroKilled) {
  run_and_check("rank0_killed", {"--kill_rank=0", "--kill_step=5"},
                {{"rank1", "rank2", "rank3"}, {"rank0"}, /*steps_lost=*/1, "", false});
}

TEST_P(FtProcesses, MiddleRankKilled) {
  run_and_check("rank2_killed", {"--kill_rank=2", "--kill_step=5"},
                {{"rank0", "rank1", "rank3"}, {"rank2"}, /*steps_lost=*/1, "", false});
}

// The second a few steps after the first, in the survivors' generation; rank 0 of both.
TEST_P(FtProcesses, TwoRanksKilledInARow) {
  run_and_check("two_killed", {"--kills=rank2@5,rank0@9"},
                {{"rank1", "rank3"}, {"rank2", "rank0"}, /*steps_lost=*/2, "", false});
}

// rank1 dies right after its step 5 was aborted (rank2's death): the others are forming the
// next generation and must form it without rank1 too. No step more is lost.
TEST_P(FtProcesses, KillDuringRecovery) {
  run_and_check("killed_in_recovery", {"--kill_rank=2", "--kill_step=5", "--kill_in_recovery=rank1"},
                {{"rank0", "rank3"}, {"rank2", "rank1"}, /*steps_lost=*/1, "", false});
}

// rank0 dies once it has arrived at the next generation: it is in that generation's
// membership, and its group's creation waits for it (until a heartbeat timeout, then the
// generation after forms without it).
TEST_P(FtProcesses, KillDuringRecoveryOnceArrived) {
  run_and_check("killed_once_arrived", {"--kill_rank=2", "--kill_step=5", "--kill_in_recovery=rank0@arrived"},
                {{"rank1", "rank3"}, {"rank2", "rank0"}, /*steps_lost=*/1, "", false});
}

// rank1 dies in step 5; its replacement starts 0.1 s after and is taken in at a step
// boundary, with the state broadcast to it.
TEST_P(FtProcesses, ReplacementJoins) {
  run_and_check("replacement_joins", {"--kill_rank=1", "--kill_step=5", "--rejoin_after_s=0.1"},
                {{"rank0", "rank1+1", "rank2", "rank3"}, {"rank1"}, /*steps_lost=*/1, "rank1+1", false});
}

// A joiner whose model is one wider, started with the job: refused with both states named,
// while the four go on undisturbed (a longer job, so that it is refused during training).
TEST_P(FtProcesses, JoinerWithOtherStateIsRefused) {
  run_and_check("joiner_refused", {"--kill_rank=-1", "--refused_joiner_after_s=0"},
                {{"rank0", "rank1", "rank2", "rank3"}, {}, /*steps_lost=*/0, "", true, /*steps=*/60});
}

INSTANTIATE_TEST_SUITE_P(Backends, FtProcesses, ::testing::Values("gloo", "shm"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace distcomm
