// How messages name lists of ranks (rank_list_text, ranks_text), and the width of a Desync's
// table: at 96 ranks on a host both grew with the rank count until a Desync printed 153 KB.
#include <algorithm>
#include <sstream>

#include <gtest/gtest.h>

#include "api/diagnostics/op_fingerprint.h"
#include "api/diagnostics/progress_report.h"
#include "ddp/message_format.h"

namespace distcomm {
namespace {

std::vector<int> range_but(int size, int skip) {
  std::vector<int> ranks;
  for (int r = 0; r < size; ++r) {
    if (r != skip) ranks.push_back(r);
  }
  return ranks;
}

size_t longest_line(const std::string& text) {
  std::istringstream lines(text);
  size_t longest = 0;
  for (std::string line; std::getline(lines, line);) longest = std::max(longest, line.size());
  return longest;
}

// Messages and tests of groups of 2-8 ranks read as they always have.
TEST(RankList, ShortListsAreSpelledOut) {
  EXPECT_EQ(rank_list_text({}), "[]");
  EXPECT_EQ(rank_list_text({3}), "[3]");
  EXPECT_EQ(rank_list_text({1, 2}), "[1, 2]");
  EXPECT_EQ(rank_list_text({0, 1, 2, 3, 4, 5, 6, 7}), "[0, 1, 2, 3, 4, 5, 6, 7]");
  // Unsorted and repeated ranks: as given.
  EXPECT_EQ(rank_list_text({3, 1, 2}), "[3, 1, 2]");
  EXPECT_EQ(rank_list_text({2, 2, 1}), "[2, 2, 1]");
  EXPECT_EQ(rank_items_text({0, 2}), "0, 2");
  EXPECT_EQ(ranks_text({3}), "rank 3");
  EXPECT_EQ(ranks_text({0, 2}), "ranks [0, 2]");
  EXPECT_EQ(ranks_text({0, 1, 2, 3, 4, 5, 6, 7}), "ranks [0, 1, 2, 3, 4, 5, 6, 7]");
}

TEST(RankList, LongListsWriteRunsAsRanges) {
  EXPECT_EQ(rank_list_text(range_but(96, 48)), "[0-47, 49-95]");
  EXPECT_EQ(rank_list_text(range_but(64, 20)), "[0-19, 21-63]");
  EXPECT_EQ(rank_list_text(range_but(9, -1)), "[0-8]");
  EXPECT_EQ(rank_items_text(range_but(96, 48)), "0-47, 49-95");
  // A run of two stays two ranks; lone ranks stay as they are.
  EXPECT_EQ(rank_list_text({0, 1, 3, 4, 5, 7, 9, 10, 12}), "[0, 1, 3-5, 7, 9, 10, 12]");
  // Order kept: a run is a step of +1 in the order given, so nothing is sorted or merged.
  EXPECT_EQ(rank_list_text({9, 8, 7, 6, 5, 4, 3, 2, 1, 0}), "[9, 8, 7, 6, 5, 4, 3, 2, 1, 0]");
  EXPECT_EQ(rank_list_text({5, 6, 7, 0, 1, 2, 3, 3, 4, 5}), "[5-7, 0-3, 3-5]");
  EXPECT_EQ(rank_list_text({2147483645, 2147483646, 2147483647, 0, 1, 2, 3, 4, 5}), "[2147483645-2147483647, 0-5]");
  // The count, where a range hides it (of distinct ranks).
  EXPECT_EQ(ranks_text(range_but(96, 48)), "95 ranks [0-47, 49-95]");
  EXPECT_EQ(ranks_text({0, 0, 1, 2, 3, 4, 5, 6, 7}), "8 ranks [0, 0-7]");
}

// DDP's spelling (no brackets) of the same lists.
TEST(RankList, DdpMessagesUseTheSameLists) {
  EXPECT_EQ(ddp::rank_list({3}), "rank 3");
  EXPECT_EQ(ddp::rank_list({0, 2}), "ranks 0, 2");
  EXPECT_EQ(ddp::rank_list({2, 0, 0}), "ranks 2, 0, 0");
  EXPECT_EQ(ddp::rank_list(range_but(96, 48)), "95 ranks 0-47, 49-95");
}

// The stall line each waiting rank prints: one clause per group of ranks, not 94 numbers.
TEST(RankList, AStallLineNamesManyRanksAsRanges) {
  OpFingerprint op;
  op.op = OpType::kAllReduce;
  op.seq = 6;
  op.set_tensor(Tensor::zeros({101}));
  op.has_reduction = true;
  std::vector<std::optional<ProgressReport>> by_rank(96);
  for (int r = 0; r < 96; ++r) {
    if (r == 48) continue;  // did not report
    ProgressReport p;
    p.rank = r;
    p.pending.push_back({op, 5000});
    p.last_collective = op;
    by_rank[r] = p;
  }
  const std::string line = explain_wait(op, by_rank, 0);
  EXPECT_NE(line.find("rank 48 did not report"), std::string::npos) << line;
  EXPECT_NE(line.find("94 ranks [1-47, 49-95] wait in it too"), std::string::npos) << line;
  EXPECT_LT(line.size(), 200u) << line;
}

// A Desync at 96 ranks: the rows do not line up under a long list's head.
TEST(RankTable, ALongHeadDoesNotPadTheOtherRows) {
  std::vector<std::string> texts(96, "all_reduce #6 float32[100] sum");
  texts[48] = "all_reduce #6 float32[101] sum";
  EXPECT_EQ(rank_table(texts),
            "  95 ranks [0-47, 49-95]: all_reduce #6 float32[100] sum\n"
            "  rank 48:                all_reduce #6 float32[101] sum\n");
  // Lists no range shortens (every other rank): their heads are long, and the other rows
  // are not padded to them; short heads still line up with each other.
  for (int r = 0; r < 96; ++r) texts[r] = r % 2 ? "B" : "A";
  texts[1] = texts[3] = "C";
  texts[5] = "D";
  std::string evens, odds;
  for (int r = 0; r < 96; r += 2) evens += (r ? ", " : "") + std::to_string(r);
  for (int r = 7; r < 96; r += 2) odds += (r > 7 ? ", " : "") + std::to_string(r);
  const std::string table = rank_table(texts);
  EXPECT_EQ(table, "  48 ranks [" + evens + "]: A\n"
                   "  ranks [1, 3]: C\n"
                   "  rank 5:       D\n"
                   "  45 ranks [" + odds + "]: B\n");
  EXPECT_LT(longest_line(table), 300u);
}

}  // namespace
}  // namespace distcomm
