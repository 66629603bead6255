#include "tools/bench/bench_record.h"

#include <gtest/gtest.h>

#include "api/errors.h"

namespace distcomm {
namespace bench {
namespace {

BenchRecord sample(bool inplace, int64_t wrong = 0) {
  BenchRecord r;
  r.op = "all_gather";
  r.backend = "gloo";
  r.bytes = 1048576;
  r.count = 131072;
  r.dtype = "float32";
  r.redop = "none";
  r.root = -1;
  r.nranks = 2;
  r.inplace = inplace;
  r.time_us = 250.5;
  r.time_min_us = 200;
  r.time_median_us = 240.25;
  r.time_max_us = 400;
  r.time_loop_us = 230.5;
  r.time_iter_mean_us = 260.75;
  r.requested_bytes = 1048579;
  r.algbw = gigabytes_per_second(r.bytes, r.time_us);
  r.busbw = r.algbw / 2;
  r.wrong = wrong;
  r.iters = 20;
  r.timing = "max";
  return r;
}

// nccl-tests' -a N: each rank's loop (its calls' times summed) / iterations, then combined
// across ranks; never each iteration's slowest rank averaged, which counts a stall on one
// rank in one iteration and on the other rank in the next twice.
TEST(Timing, TimeIsTheRanksLoopTimesCombinedAsNcclTests) {
  // 2 ranks x 4 iterations, rank-major; loops: rank 0 110 us, rank 1 140 us.
  const std::vector<double> t = {10, 50, 30, 20,   // rank 0
                                 40, 10, 30, 60};  // rank 1
  EXPECT_DOUBLE_EQ(summarize_times(t, 2, 4, RankTime::kMax).time_us, 35);       // max(27.5, 35)
  EXPECT_DOUBLE_EQ(summarize_times(t, 2, 4, RankTime::kAverage).time_us, 31.25);
  EXPECT_DOUBLE_EQ(summarize_times(t, 2, 4, RankTime::kMin).time_us, 27.5);
  EXPECT_DOUBLE_EQ(summarize_times(t, 2, 4, RankTime::kRank0).time_us, 27.5);
  // Alternating stalls (as on a busy host): each iteration's slowest is 100, but every
  // rank's loop is 4 x 55 / 4 = 55 us.
  const std::vector<double> stalls = {100, 10, 100, 10,   // rank 0
                                      10, 100, 10, 100};  // rank 1
  const TimingSummary s = summarize_times(stalls, 2, 4, RankTime::kMax);
  EXPECT_DOUBLE_EQ(s.time_us, 55);
  EXPECT_DOUBLE_EQ(s.iter_mean_us, 100);  // kept under its own name (JSON time_iter_mean_us)
}

TEST(Timing, SlowestRankPerIterationThenSummary) {
  // 2 ranks x 4 iterations, rank-major.
  const std::vector<double> t = {10, 50, 30, 20,   // rank 0
                                 40, 10, 30, 60};  // rank 1
  const TimingSummary max = summarize_times(t, 2, 4, RankTime::kMax);  // per iteration: 40 50 30 60
  EXPECT_DOUBLE_EQ(max.iter_mean_us, 45);
  EXPECT_DOUBLE_EQ(max.min_us, 30);
  EXPECT_DOUBLE_EQ(max.median_us, 45);
  EXPECT_DOUBLE_EQ(max.max_us, 60);
  EXPECT_DOUBLE_EQ(max.time_us, 35);  // rank means 27.5 and 35: the slowest rank's loop
  const TimingSummary avg = summarize_times(t, 2, 4, RankTime::kAverage);  // 25 30 30 40
  EXPECT_DOUBLE_EQ(avg.iter_mean_us, 31.25);
  EXPECT_DOUBLE_EQ(avg.min_us, 25);
  EXPECT_DOUBLE_EQ(avg.median_us, 30);
  EXPECT_DOUBLE_EQ(avg.max_us, 40);
  EXPECT_DOUBLE_EQ(avg.time_us, 31.25);
  const TimingSummary odd = summarize_times({3, 1, 2}, 1, 3, RankTime::kMax);
  EXPECT_DOUBLE_EQ(odd.median_us, 2);
}

// nccl-tests' -a 0 (rank 0's time) and -a 2 (the fastest rank's).
TEST(Timing, RankZeroAndFastestRank) {
  const std::vector<double> t = {10, 50, 30, 20,   // rank 0
                                 40, 10, 30, 60};  // rank 1
  const TimingSummary rank0 = summarize_times(t, 2, 4, RankTime::kRank0);  // 10 50 30 20
  EXPECT_DOUBLE_EQ(rank0.iter_mean_us, 27.5);
  EXPECT_DOUBLE_EQ(rank0.min_us, 10);
  EXPECT_DOUBLE_EQ(rank0.max_us, 50);
  EXPECT_DOUBLE_EQ(rank0.time_us, 27.5);
  const TimingSummary min = summarize_times(t, 2, 4, RankTime::kMin);  // 10 10 30 20
  EXPECT_DOUBLE_EQ(min.iter_mean_us, 17.5);
  EXPECT_DOUBLE_EQ(min.min_us, 10);
  EXPECT_DOUBLE_EQ(min.max_us, 30);
  EXPECT_DOUBLE_EQ(min.time_us, 27.5);  // rank means 27.5 and 35
  EXPECT_STREQ(rank_time_name(RankTime::kRank0), "rank0");
  EXPECT_STREQ(rank_time_name(RankTime::kMin), "min");
  EXPECT_STREQ(rank_time_description(RankTime::kMin), "fastest rank's");
}

TEST(Timing, GigabytesAreDecimal) {
  EXPECT_DOUBLE_EQ(gigabytes_per_second(1000000000, 1e6), 1.0);  // 1e9 B in 1 s
  EXPECT_DOUBLE_EQ(gigabytes_per_second(1 << 20, 1000), 1.048576);
  EXPECT_DOUBLE_EQ(gigabytes_per_second(100, 0), 0.0);
}

TEST(Table, RowHasNcclTestsColumns) {
  const BenchRecord oop = sample(false), ip = sample(true, 3);
  const std::string row = table_row(&oop, &ip);
  EXPECT_EQ(row,
            "     1048576        131072   float32    none      -1    250.5    4.19    2.09       0"
            "    250.5    4.19    2.09       3\n");
  // Header and rows line up: the column titles end where the values end.
  const std::string header = table_header();
  const size_t titles = header.find('\n', header.find('\n') + 1) - header.find('\n') - 1;
  EXPECT_EQ(titles, row.size() - 1) << header << row;
}

TEST(Table, MissingFormsAndUncheckedPrintNA) {
  BenchRecord ip = sample(true, -1);
  ip.time_us = 12345.6;
  const std::string row = table_row(nullptr, &ip);
  EXPECT_NE(row.find("    N/A     N/A     N/A     N/A    12346"), std::string::npos) << row;
  EXPECT_EQ(row.substr(row.size() - 4), "N/A\n") << row;
  ip.time_us = 5.5;
  EXPECT_NE(table_row(nullptr, &ip).find("   5.50"), std::string::npos);
}

TEST(Table, FooterCountsFailedResults) {
  std::vector<BenchRecord> records = {sample(false), sample(true)};
  std::string footer = table_footer(records);
  EXPECT_NE(footer.find("# Out of bounds values : 0 OK"), std::string::npos) << footer;
  EXPECT_NE(footer.find("# Avg bus bandwidth    : 2.09"), std::string::npos) << footer;
  records.push_back(sample(false, 5));
  records.push_back(sample(true, 1));
  records.push_back(sample(true, -1));  // unchecked: not a failure
  EXPECT_EQ(count_failed(records), 2);
  footer = table_footer(records);
  EXPECT_NE(footer.find("# Out of bounds values : 2 FAILED"), std::string::npos) << footer;
}

TEST(Json, RoundTrip) {
  BenchRecord a = sample(false);
  BenchRecord b = sample(true, -1);
  b.backend = "my \"odd\" backend\\";
  const std::string text = to_json(a) + "\n\n" + to_json(b) + "\n";
  EXPECT_NE(text.find("\"wrong\":null"), std::string::npos);
  EXPECT_NE(text.find("\"inplace\":false"), std::string::npos);
  const std::vector<BenchRecord> back = records_from_json_lines(text, "t.json");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].op, "all_gather");
  EXPECT_EQ(back[0].bytes, 1048576);
  EXPECT_EQ(back[0].count, 131072);
  EXPECT_EQ(back[0].root, -1);
  EXPECT_EQ(back[0].nranks, 2);
  EXPECT_FALSE(back[0].inplace);
  EXPECT_NEAR(back[0].busbw, a.busbw, 1e-5);
  EXPECT_DOUBLE_EQ(back[0].time_median_us, 240.25);
  EXPECT_DOUBLE_EQ(back[0].time_loop_us, 230.5);
  EXPECT_DOUBLE_EQ(back[0].time_iter_mean_us, 260.75);
  EXPECT_EQ(back[0].requested_bytes, 1048579);  // asked for; bytes is what ran
  EXPECT_EQ(back[0].wrong, 0);
  EXPECT_EQ(back[0].timing, "max");
  EXPECT_TRUE(back[1].inplace);
  EXPECT_EQ(back[1].wrong, -1);
  EXPECT_EQ(back[1].backend, b.backend);
}

TEST(Json, MalformedInputNamesFileAndLine) {
  for (const char* bad : {"{\"op\":\"x\",\"bytes\":8,\"busbw\":1}\n{\"op\": \"y\", \"bytes\": 8, \"busbw\": }",
                          "{\"op\":\"x\",\"bytes\":8,\"busbw\":1}\n{\"op\":\"y\",\"bytes\":\"8\",\"busbw\":1",
                          "{\"op\":\"x\",\"bytes\":8,\"busbw\":1}\nnot json",
                          "{\"op\":\"x\",\"bytes\":8,\"busbw\":1}\n{\"op\":\"x\",\"busbw\":1}",
                          "{\"op\":\"x\",\"bytes\":8,\"busbw\":1}\n{\"op\":\"x\",\"bytes\":\"a\",\"busbw\":1}"}) {
    try {
      records_from_json_lines(bad, "runs/a.json");
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("runs/a.json:2"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace bench
}  // namespace distcomm
