#include "tests/backends/fault/in_process_runner.h"

#include <thread>
#include <vector>

#include "api/store/hash_store.h"
#include "tests/testing/in_process_group.h"

namespace distcomm {
namespace fault {
namespace {

class ThreadRank : public Rank {
 public:
  ThreadRank(int rank, StorePtr store, Store& board) : rank_(rank), store_(std::move(store)), board_(board) {}

  int rank() const override { return rank_; }

  ProcessGroupPtr join(std::chrono::milliseconds timeout) override {
    testing::InProcessOptions o;
    o.timeout = timeout;
    return testing::in_process_rank(store_, rank_, kRanks, o);
  }

  void leave(ProcessGroupPtr& pg) override { pg.reset(); }

  Store& board() override { return board_; }

 private:
  const int rank_;
  const StorePtr store_;
  Store& board_;
};

class InProcessRunner : public Runner {
 public:
  std::string backend() const override { return "in_process"; }

  void run(const std::function<void(Rank&)>& fn, const std::set<int>&) override {
    auto store = std::make_shared<HashStore>();
    HashStore board;
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r) {
      threads.emplace_back([&, r] {
        ThreadRank rank(r, store, board);
        try {
          fn(rank);
        } catch (const std::exception& e) {
          ADD_FAILURE() << "rank " << r << ": uncaught " << e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
  }
};

}  // namespace

RunnerPtr in_process_runner() { return std::make_shared<InProcessRunner>(); }

}  // namespace fault
}  // namespace distcomm
