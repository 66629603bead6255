#include "tests/backends/fault/forked_runner.h"

#include "api/store/file_store.h"
#include "api/init.h"
#include "api/process/job_identity.h"
#include "api/process/local_processes.h"
#include "api/plugin/plugin_registry.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace fault {
namespace {

// What every rank of one run shares: made before the fork.
struct Job {
  std::string backend;
  std::vector<std::string> host_ids;  // DISTCOMM_HOST_ID per rank, or none
  int ranks = kRanks;
  std::string dir;  // the run's folder: the board
  int port = 0;     // rank 0's TCPStore
  JobIdentity identity;
};

class ForkedRank : public Rank {
 public:
  ForkedRank(const Job& job, int rank) : job_(job), rank_(rank), board_(job.dir + "/board") {}
  ~ForkedRank() override {
    if (is_initialized()) destroy_process_group();
  }

  int rank() const override { return rank_; }

  ProcessGroupPtr join(std::chrono::milliseconds timeout) override {
    InitOptions o;
    o.backend = job_.backend;
    o.init_method = "tcp://127.0.0.1:" + std::to_string(job_.port);
    o.rank = rank_;
    o.world_size = job_.ranks;
    o.timeout = timeout;
    o.identity = job_.identity;
    if (!job_.host_ids.empty()) ::setenv("DISTCOMM_HOST_ID", job_.host_ids.at(static_cast<size_t>(rank_)).c_str(), 1);
    return init_process_group(o);
  }

  void leave(ProcessGroupPtr& pg) override {
    pg.reset();
    destroy_process_group();
  }

  Store& board() override { return board_; }

 private:
  const Job& job_;
  const int rank_;
  FileStore board_;
};

class ForkedRunner : public Runner {
 public:
  ForkedRunner(std::string backend, std::vector<std::string> host_ids, int ranks)
      : backend_(std::move(backend)), host_ids_(std::move(host_ids)), ranks_(ranks) {}

  std::string backend() const override { return backend_; }
  int ranks() const override { return ranks_; }

  std::string unavailable() const override {
    for (const std::string& plugin : backend_ == "auto" || backend_ == "hier" ? std::vector<std::string>{"shm", "gloo"}
                                                        : std::vector<std::string>{backend_}) {
      const PluginInfo& info = load_plugin(plugin);
      if (!info.available) return plugin + ": " + info.unavailable_reason;
    }
    return "";
  }

  void run(const std::function<void(Rank&)>& fn, const std::set<int>& killed) override {
    const Job job{backend_, host_ids_, ranks(), testing::make_temp_dir(), local::pick_free_port(), new_job_identity()};
    testing::RunOptions options;
    options.may_be_killed = killed;
    // Far above any case's own bound (kWithin, a few times over): a rank still running
    // then hangs, and is reported so.
    options.timeout = std::chrono::seconds(60);
    testing::run_ranks(
        job.ranks,
        [&](int rank, int) {
          ForkedRank r(job, rank);
          fn(r);
        },
        options);
    testing::remove_temp_dir(job.dir);
  }

 private:
  const std::string backend_;
  const std::vector<std::string> host_ids_;
  const int ranks_;
};

}  // namespace

RunnerPtr forked_runner(const std::string& backend, std::vector<std::string> host_ids) {
  const int ranks = host_ids.empty() ? kRanks : static_cast<int>(host_ids.size());
  return std::make_shared<ForkedRunner>(backend, std::move(host_ids), ranks);
}

RunnerPtr forked_runner_of(const std::string& backend, int ranks) {
  return std::make_shared<ForkedRunner>(backend, std::vector<std::string>{}, ranks);
}

}  // namespace fault
}  // namespace distcomm
