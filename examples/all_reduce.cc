// all_reduce: after it, every rank holds the sum of what all ranks held.
//
//   $ bazel run //examples:all_reduce -- --nproc=3
//   Rank 0 has 0
//   Rank 1 has 0
//   Rank 2 has 0
//
// Ranks 0, 1 and 2 start with 1, 2 and -3 (any further rank with 0), so the sum is 0. This
// is the first program of the torch.distributed tutorial, in C++. Run by hand it starts its
// own ranks; under tools/launch, mpirun or srun it is one of them.
#include <sstream>

#include <distcomm/api/init.h>
#include <distcomm/api/logging.h>
#include <distcomm/api/run_main.h>
#include "examples/self_launch.h"

int main(int argc, char** argv) {
  return distcomm::run_main("all_reduce", [&] {
    // Run by hand, this starts --nproc copies of the program and exits; each copy is a rank.
    distcomm::InitOptions init = distcomm::examples::self_launch(argc, argv, /*default_nproc=*/3);
    distcomm::ProcessGroupPtr pg = distcomm::init_process_group(init);

    const float start_values[] = {1, 2, -3};
    const float mine = pg->rank() < 3 ? start_values[pg->rank()] : 0;
    distcomm::Tensor x = distcomm::Tensor::of({mine});

    pg->all_reduce(x)->wait();  // ReduceOp::SUM unless AllReduceOptions says otherwise

    // Printed by rank 0 in rank order, however the ranks' outputs would otherwise interleave.
    std::ostringstream line;
    line << "Rank " << pg->rank() << " has " << x.item();
    distcomm::ordered_print(*pg, line.str(), /*prefix=*/false);
    return 0;
  });
}
