// A rank started by hand, as a user would (RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in
// its environment; gloo), for the tests of how a job ends: rank 0, which serves the store,
// leaving (store_host_test) and a SIGTERM's trace dump (diagnostics/sigterm_dump_test).
//
//   rank_probe init             init_process_group (group timeout 3 s), nothing more
//   rank_probe skip <gate>      two all_reduces; then rank 1 skips the third and waits until
//                               the file <gate> exists, while the others run it with a 1.5 s
//                               timeout (the group's is 10 s)
//   rank_probe throw            two all_reduces; then rank 0 throws an error of its own
//                               (std::runtime_error "rank 0 found a corrupt batch"), the
//                               others run a third (group timeout 10 s)
//   rank_probe ok <gate>        two all_reduces, "rank R done (after <ms> ms)"; then rank 0
//                               returns while the others stay (connected to its store)
//                               until <gate> exists: a successful job's exit, for measuring
//   rank_probe hang <gate>      one all_reduce; then rank 0 runs a second, saying
//                               "rank 0 waits in all_reduce #1" on stdout, while the others
//                               wait until <gate> exists
//   rank_probe own_term <gate>  as hang, where the program handles SIGTERM itself: its
//                               handler exits with status 7
//
// A distcomm error ends a rank through run_main (exit status 1), after one line on stdout:
// "rank R caught <type>: <message> (after <ms> ms)", the time since the program started.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "api/errors.h"
#include "api/init.h"
#include "api/run_main.h"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const Clock::time_point g_start = Clock::now();

void all_reduce(distcomm::ProcessGroup& pg, std::chrono::milliseconds timeout = distcomm::kUseDefault) {
  distcomm::Tensor t = distcomm::Tensor::of<float>({1.0f});
  distcomm::AllReduceOptions o;
  o.timeout = timeout;
  pg.all_reduce(t, o)->wait();
}

// Waits until the test creates `path`: the ranks that stay out of an op are told to end.
void wait_for_gate(const std::string& path) {
  const auto deadline = Clock::now() + 60s;
  while (::access(path.c_str(), F_OK) != 0) {
    if (Clock::now() > deadline) throw std::runtime_error("the gate " + path + " did not open in 60 s");
    std::this_thread::sleep_for(20ms);
  }
}

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

int64_t ms_since_start() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - g_start).count();
}

int rank_from_environment() {
  const char* r = std::getenv("RANK");
  return r ? std::atoi(r) : -1;
}

extern "C" void own_sigterm_handler(int) { ::_exit(7); }

int run(const std::string& mode, const std::string& gate) {
  if (mode == "own_term") {
    struct sigaction sa {};
    sa.sa_handler = own_sigterm_handler;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGTERM, &sa, nullptr);
  }
  distcomm::InitOptions o;
  o.backend = "gloo";
  o.timeout = mode == "init" ? 3s : mode == "hang" || mode == "own_term" ? 60s : 10s;
  distcomm::ProcessGroupPtr pg = distcomm::init_process_group(o);
  const int rank = pg->rank();
  if (mode == "init") return 0;
  if (mode == "skip") {
    all_reduce(*pg);
    all_reduce(*pg);
    if (rank == 1) {
      wait_for_gate(gate);
      say("rank 1 skipped all_reduce #2");
      return 0;
    }
    all_reduce(*pg, 1500ms);
    throw distcomm::Error("all_reduce #2 succeeded without rank 1");
  }
  if (mode == "ok") {
    all_reduce(*pg);
    all_reduce(*pg);
    say("rank " + std::to_string(rank) + " done (after " + std::to_string(ms_since_start()) + " ms)");
    if (rank != 0) wait_for_gate(gate);
    return 0;
  }
  if (mode == "throw") {
    all_reduce(*pg);
    all_reduce(*pg);
    if (rank == 0) throw std::runtime_error("rank 0 found a corrupt batch");
    all_reduce(*pg);
    throw distcomm::Error("all_reduce #2 succeeded without rank 0");
  }
  if (mode == "hang" || mode == "own_term") {
    all_reduce(*pg);
    if (rank != 0) {
      wait_for_gate(gate);
      return 0;
    }
    distcomm::Tensor t = distcomm::Tensor::of<float>({1.0f});
    distcomm::WorkPtr work = pg->all_reduce(t);
    say("rank 0 waits in all_reduce #1");
    work->wait();
    throw distcomm::Error("all_reduce #1 succeeded without rank 1");
  }
  throw distcomm::InvalidArgument("rank_probe: mode must be init, ok, skip, throw, hang or own_term, got '" + mode + "'");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const std::string gate = argc > 2 ? argv[2] : "";
  return distcomm::run_main("rank_probe", [&] {
    try {
      return run(mode, gate);
    } catch (const distcomm::Error&) {
      say("rank " + std::to_string(rank_from_environment()) + " caught " +
          distcomm::type_and_message(std::current_exception()) + " (after " + std::to_string(ms_since_start()) + " ms)");
      throw;
    }
  });
}
