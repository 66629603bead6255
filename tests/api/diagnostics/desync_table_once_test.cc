// One rank of a large group disagrees on a collective: the table of each rank's op must
// come out once, not once per rank. Found at 96 ranks on one host: every rank's Desync held
// the whole table, and run_main (or the program's own catch) printed it on every rank, 606
// lines of stderr for one wrong dtype. Now the lowest rank's error holds the table and each
// other rank's error is one line naming the op, its sequence number, the culprit and the
// rank whose error holds the table. Small groups (up to kRankListSpelledOut ranks) keep the
// table on every rank: a handful of copies reads fine, and each rank's error stands alone.
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/diagnostics/desync_summary.h"
#include "api/errors.h"
#include "api/process_group.h"
#include "tests/testing/multiprocess.h"
#include "tests/testing/test_files.h"

namespace distcomm {
namespace {

using testing::read_file;
using testing::temp_path;

constexpr int kCulprit = 5;
// The table's head with its rows on lines of their own: a quote folded into one line
// (quoted_desync) keeps the words, not the table.
const char kTableHead[] = "Each rank's op there:\n";

std::string message_file(const std::string& which, int rank) {
  return temp_path("desync_once_" + which + "_" + std::to_string(rank) + ".msg");
}

// Every rank: rank kCulprit reduces int32 where the others reduce float32; each rank's
// Desync message goes to a file (what run_main would print on its stderr).
void run_disagreement(int size, const std::string& which, testing::GroupHarnessOptions options) {
  testing::run_group(
      size, "shm",
      [&](ProcessGroup& pg) {
        pg.barrier()->wait();
        Tensor t = Tensor::zeros({10}, pg.rank() == kCulprit ? DType::kInt32 : DType::kFloat32);
        std::string message = "(no Desync)";
        try {
          pg.all_reduce(t)->wait();
        } catch (const Desync& e) {
          message = e.what();
        }
        std::ofstream(message_file(which, pg.rank()), std::ios::binary | std::ios::trunc) << message;
      },
      options);
}

// The messages of a group of `size` ranks; the ranks whose message holds the table.
std::vector<int> ranks_with_table(int size, const std::string& which, std::vector<std::string>& messages) {
  std::vector<int> with_table;
  for (int r = 0; r < size; ++r) {
    messages.push_back(read_file(message_file(which, r)));
    if (messages.back().find(kTableHead) != std::string::npos) with_table.push_back(r);
  }
  return with_table;
}

void expect_one_table(int size, const std::string& which, int table_rank) {
  std::vector<std::string> messages;
  const std::vector<int> with_table = ranks_with_table(size, which, messages);
  ASSERT_EQ(with_table, std::vector<int>{table_rank}) << "rank 0's message: " << messages[0];
  for (int r = 0; r < size; ++r) {
    const std::string& m = messages[r];
    // What every rank's error must still say: who it is, the op and its number, the culprit.
    EXPECT_NE(m.find("rank " + std::to_string(r) + "/" + std::to_string(size) + " group 'world'"), std::string::npos)
        << m;
    EXPECT_NE(m.find("all_reduce #1"), std::string::npos) << m;
    if (r == table_rank) {
      // The table's own row names the culprit.
      EXPECT_NE(m.find("rank " + std::to_string(kCulprit) + ":"), std::string::npos) << m;
      continue;
    }
    EXPECT_NE(m.find("rank " + std::to_string(kCulprit) + " runs all_reduce #1 int32[10] sum"), std::string::npos)
        << "rank " << r << ": " << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << "rank " << r << " should say it in one line: " << m;
    EXPECT_NE(m.find("rank " + std::to_string(table_rank) + "'s error holds the table"), std::string::npos)
        << "rank " << r << ": " << m;
  }
}

TEST(DesyncTableOnce, DetailChecksShowTheTableOnOneRankOf16) {
  testing::GroupHarnessOptions options;
  options.debug = DebugLevel::kDetail;
  run_disagreement(16, "detail16", options);
  expect_one_table(16, "detail16", 0);
}

// Without DETAIL one rank finds it (shm reads the culprit's slot; the stall watch compares
// reports) and records it; every other rank adopts that record and quotes the finder's
// message with its table folded into one line (quoted_desync, through explained_by in
// api/diagnostics/failure_adoption.cc): the table is shown whole by the finder alone.
TEST(DesyncTableOnce, AnAdoptedDesyncQuotesTheTableInOneLineIn16) {
  testing::GroupHarnessOptions options;
  options.op_timeout = std::chrono::milliseconds(10000);
  run_disagreement(16, "watch16", options);
  std::vector<std::string> messages;
  const std::vector<int> with_table = ranks_with_table(16, "watch16", messages);
  EXPECT_LE(with_table.size(), 1u) << "rank 0's message: " << messages[0];
}

TEST(DesyncTableOnce, ASmallGroupShowsTheTableOnEveryRank) {
  testing::GroupHarnessOptions options;
  options.debug = DebugLevel::kDetail;
  run_disagreement(kCulprit + 1, "detail6", options);
  std::vector<std::string> messages;
  EXPECT_EQ(ranks_with_table(kCulprit + 1, "detail6", messages).size(), static_cast<size_t>(kCulprit + 1));
}

// The pure part: the culprit is whoever differs from the largest group of ranks that agree.
TEST(DesyncSummary, NamesTheCulpritAndTheTableRank) {
  std::vector<std::string> texts(12, "all_reduce #3 float32[10] sum");
  texts[7] = "all_reduce #3 int32[10] sum";
  const DesyncSummary s = summarize_desync(texts);
  EXPECT_EQ(s.culprits, std::vector<int>{7});
  EXPECT_EQ(s.table_rank, 0);
  EXPECT_EQ(desync_line(3, s),
            "the ranks disagree on collective #3: rank 7 runs all_reduce #3 int32[10] sum where 11 ranks [0-6, 8-11] "
            "run all_reduce #3 float32[10] sum; rank 0's error holds the table of each rank's op (in a group of more "
            "than 8 ranks, one rank shows it)");
  EXPECT_FALSE(table_on_every_rank(12));
  EXPECT_TRUE(table_on_every_rank(8));
}

TEST(DesyncSummary, NamesTheFirstPairOfSplitsThatDoNotPairUp) {
  const DesyncSummary s = summarize_desync(std::vector<std::string>(10, "all_to_all #2 float32"));
  EXPECT_EQ(split_pairs_line(2, "  rank 1 sends 1 elements to rank 0, which expects 2\n"
                                "  rank 0 sends 2 elements to rank 1, which expects 1\n", s),
            "the all_to_all's splits at collective #2 do not pair up: rank 1 sends 1 elements to rank 0, which "
            "expects 2 (and 1 more pairs); rank 0's error holds the table of each rank's op (in a group of more than 8 "
            "ranks, one rank shows it)");
}

// What a rank that adopts another's Desync quotes of it (GroupFailure's "Its error: ...").
TEST(DesyncSummary, AQuotedTableIsFoldedIntoOneLineInALargeGroup) {
  const std::string found =
      "rank 14/16 group 'world' all_reduce #1 (float32[10] on cpu): the ranks disagree on collective #1 (a rank "
      "skipped or added a collective, or passed other arguments). Each rank's op there:\n"
      "  15 ranks [0-4, 6-15]: all_reduce #1 float32[10] sum\n"
      "  rank 5:               all_reduce #1 int32[10] sum\n"
      "(found by rank 14 at round 1 of 1 of its op, reading rank 5's; no data was exchanged)";
  EXPECT_EQ(quoted_desync(found, 16),
            "rank 14/16 group 'world' all_reduce #1 (float32[10] on cpu): the ranks disagree on collective #1 (a rank "
            "skipped or added a collective, or passed other arguments). Each rank's op there: 15 ranks [0-4, 6-15]: "
            "all_reduce #1 float32[10] sum | rank 5: all_reduce #1 int32[10] sum\n"
            "(found by rank 14 at round 1 of 1 of its op, reading rank 5's; no data was exchanged)");
  EXPECT_EQ(quoted_desync(found, 8), found);
  EXPECT_EQ(quoted_desync("ranks disagree on collective #5", 16), "ranks disagree on collective #5");
  std::string many = "the ranks disagree on collective #1. Each rank's op there:\n";
  for (int r = 0; r < 5; ++r) many += "  rank " + std::to_string(r) + ": op " + std::to_string(r) + "\n";
  EXPECT_EQ(quoted_desync(many, 16),
            "the ranks disagree on collective #1. Each rank's op there: rank 0: op 0 | rank 1: op 1 | rank 2: op 2 | 2 "
            "more rows");
}

}  // namespace
}  // namespace distcomm
