// A message beyond 2 GiB and beyond INT_MAX elements through the fixed-size staging: an
// all_reduce and a broadcast of 2^31 + 1000 uint8 on 2 ranks, every element checked. Needs
// about 4.5 GiB of memory (each rank holds its 2 GiB tensor); the staging stays at its
// default size whatever the message.
#include <gtest/gtest.h>

#include <cstdint>

#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

constexpr int64_t kCount = (int64_t{1} << 31) + 1000;

uint8_t value(int rank, int64_t i) { return static_cast<uint8_t>((i + rank) % 100); }

// The first element that is not want(i), or -1.
template <typename Want>
int64_t first_mismatch(const Tensor& t, Want want) {
  const uint8_t* p = t.data_as<uint8_t>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (p[i] != want(i)) return i;
  }
  return -1;
}

TEST(ShmLargeMessage, AllReduceAndBroadcastOfMoreThanTwoGiB) {
  testing::GroupHarnessOptions options;
  options.run.timeout = std::chrono::seconds(800);
  options.op_timeout = std::chrono::milliseconds(600000);
  testing::run_group(2, "shm", [](ProcessGroup& pg) {
    Tensor t = Tensor::empty({kCount}, DType::kUInt8);
    uint8_t* p = t.data_as<uint8_t>();
    for (int64_t i = 0; i < kCount; ++i) p[i] = value(pg.rank(), i);
    pg.all_reduce(t)->wait();
    const int64_t bad = first_mismatch(t, [](int64_t i) { return static_cast<uint8_t>(value(0, i) + value(1, i)); });
    EXPECT_EQ(bad, -1) << "all_reduce: element " << bad << " is wrong";

    if (pg.rank() == 1) {
      for (int64_t i = 0; i < kCount; ++i) p[i] = value(7, i);
    }
    BroadcastOptions from_one;
    from_one.root = 1;
    pg.broadcast(t, from_one)->wait();
    const int64_t wrong = first_mismatch(t, [](int64_t i) { return value(7, i); });
    EXPECT_EQ(wrong, -1) << "broadcast: element " << wrong << " is wrong";
  }, options);
}

}  // namespace
}  // namespace distcomm
