// collectives: the classic collectives one after another, each followed by what every rank
// holds, printed in rank order.
//
//   $ bazel run //examples:collectives -- --nproc=4
//   broadcast from rank 0:
//     rank 0 has [1, 2, 3]
//     rank 1 has [1, 2, 3]
//   ...
//
// A collective is called by every rank of a group (the world here, unless it says
// otherwise), in the same order on every rank.
#include <sstream>
#include <string>
#include <vector>

#include <distcomm/api/init.h>
#include <distcomm/api/logging.h>
#include <distcomm/api/run_main.h>
#include "examples/self_launch.h"

using distcomm::ProcessGroup;
using distcomm::Tensor;

namespace {

// Every rank calls it: rank 0 prints the title, then each rank's line, in rank order.
void show(ProcessGroup& pg, const std::string& title, const std::string& holding) {
  std::string text = pg.rank() == 0 ? title + "\n" : "";
  text += "  rank " + std::to_string(pg.rank()) + " has " + holding;
  distcomm::ordered_print(pg, text, /*prefix=*/false);
}

// "[1, 2, 3]"
std::string values(const Tensor& t) {
  std::ostringstream os;
  os << "[";
  for (int64_t i = 0; i < t.numel(); ++i) os << (i ? ", " : "") << t.item(i);
  os << "]";
  return os.str();
}

// "[0] [10] [20]", or "nothing" for a rank that received no list.
std::string values(const std::vector<Tensor>& tensors) {
  if (tensors.empty()) return "nothing";
  std::string s;
  for (const Tensor& t : tensors) s += (s.empty() ? "" : " ") + values(t);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  return distcomm::run_main("collectives", [&] {
    // Run by hand, this starts --nproc copies of the program and exits; each copy is a rank.
    distcomm::InitOptions init = distcomm::examples::self_launch(argc, argv, /*default_nproc=*/4);
    distcomm::ProcessGroupPtr world = distcomm::init_process_group(init);
    ProcessGroup& pg = *world;
    const int rank = pg.rank();
    const int size = pg.size();

    // broadcast: rank 0's tensor is copied to every rank.
    Tensor b = rank == 0 ? Tensor::of({1.f, 2.f, 3.f}) : Tensor::zeros({3});
    pg.broadcast(b)->wait();
    show(pg, "broadcast from rank 0:", values(b));

    // reduce: the sum of all ranks' tensors lands on rank 0 only; the others keep theirs.
    Tensor r = Tensor::of({float(rank + 1)});
    pg.reduce(r)->wait();
    show(pg, "reduce (sum of rank+1) to rank 0:", values(r));

    // all_gather: every rank gets every rank's tensor, in rank order.
    std::vector<Tensor> gathered_everywhere;
    for (int i = 0; i < size; ++i) gathered_everywhere.push_back(Tensor::zeros({1}));
    pg.all_gather(gathered_everywhere, Tensor::of({float(rank * 10)}))->wait();
    show(pg, "all_gather of rank*10:", values(gathered_everywhere));

    // gather: like all_gather, but only rank 0 receives; the others pass no outputs.
    std::vector<Tensor> gathered_on_root;
    if (rank == 0) {
      for (int i = 0; i < size; ++i) gathered_on_root.push_back(Tensor::zeros({1}));
    }
    pg.gather(gathered_on_root, Tensor::of({float(rank * rank)}))->wait();
    show(pg, "gather of rank*rank to rank 0:", values(gathered_on_root));

    // scatter: rank 0 hands tensor i to rank i.
    std::vector<Tensor> pieces;
    if (rank == 0) {
      for (int i = 0; i < size; ++i) pieces.push_back(Tensor::of({float(100 + i)}));
    }
    Tensor piece = Tensor::zeros({1});
    pg.scatter(piece, pieces)->wait();
    show(pg, "scatter from rank 0:", values(piece));

    // new_group: the even ranks form a group of their own (every rank takes part in making
    // it; the others get nullptr) and sum their ranks within it.
    std::vector<int> evens;
    for (int i = 0; i < size; i += 2) evens.push_back(i);
    distcomm::ProcessGroupPtr group = pg.new_group(evens);
    std::string holding = "nothing: not in the group";
    if (group) {
      Tensor s = Tensor::of({float(rank)});
      group->all_reduce(s)->wait();
      holding = values(s) + " (rank " + std::to_string(group->rank()) + " of " + std::to_string(group->size()) +
                " in the group)";
    }
    show(pg, "all_reduce of rank within the even ranks' group:", holding);
    return 0;
  });
}
