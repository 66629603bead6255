// One rank of the two-host test (two_host_test.sh): joins a world of two through
// init_process_group with an explicit rank and a tcp:// address, checks all_reduce and
// all_gather results, prints "rank R: ok" and exits 0 (1 with the reason otherwise).
//
//   two_host_rank <rank> <world_size> tcp://<host>:<port>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "api/init.h"

namespace {

int fail(int rank, const std::string& why) {
  std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, why.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s <rank> <world_size> tcp://<host>:<port>\n", argv[0]);
    return 2;
  }
  const int rank = std::atoi(argv[1]);
  const int world = std::atoi(argv[2]);
  try {
    distcomm::InitOptions o;
    o.backend = "gloo";
    o.init_method = argv[3];
    o.rank = rank;
    o.world_size = world;
    o.timeout = std::chrono::seconds(30);
    // No interface is named: gloo binds the address that routes to the tcp:// host, which
    // is this namespace's end of the veth pair.
    distcomm::ProcessGroupPtr pg = distcomm::init_process_group(o);

    distcomm::Tensor sum = distcomm::Tensor::empty({1000});
    for (int64_t i = 0; i < sum.numel(); ++i) sum.set_item(i, static_cast<double>((rank + 1) * (i % 10)));
    pg->all_reduce(sum)->wait();
    for (int64_t i = 0; i < sum.numel(); ++i) {
      const double want = static_cast<double>(world * (world + 1) / 2 * (i % 10));
      if (sum.item(i) != want) {
        return fail(rank, "all_reduce[" + std::to_string(i) + "] = " + std::to_string(sum.item(i)) +
                              ", expected " + std::to_string(want));
      }
    }

    distcomm::Tensor mine = distcomm::Tensor::of<int64_t>({rank * 10, rank * 10 + 1});
    distcomm::Tensor all = distcomm::Tensor::zeros({2 * world}, distcomm::DType::kInt64);
    pg->all_gather_into_tensor(all, mine)->wait();
    for (int r = 0; r < world; ++r) {
      for (int k = 0; k < 2; ++k) {
        if (all.item(2 * r + k) != r * 10 + k) return fail(rank, "all_gather got " + all.str());
      }
    }
    pg->barrier()->wait();
    distcomm::destroy_process_group();
    std::printf("rank %d: ok (all_reduce and all_gather across the veth pair)\n", rank);
    return 0;
  } catch (const std::exception& e) {
    return fail(rank, e.what());
  }
}
