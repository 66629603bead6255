// A rank blocked on a late peer must not burn a core (mpi_runtime.h, "Waiting"). Rank 1
// joins each op 3 s late; rank 0 waits for it in barrier, a small all_reduce and a recv,
// then on 4 threads at once, each in a barrier of its own subgroup. Rank 0's process CPU
// time (every thread: the waiters and the plugin's MPI thread) over each 3 s wait must stay
// under 1 s; it was 1.5-2.8 s when the waiting thread polled MPI without pause, and is
// about 0.1 s with the backoff. CPU time, not wall time, so a loaded machine cannot make
// it fail: only a waiter that keeps polling can.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "api/init.h"
#include "api/run_main.h"

namespace {

constexpr auto kLate = std::chrono::seconds(3);
constexpr double kMaxCpuSeconds = 1.0;

double process_cpu_seconds() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Rank 1 sleeps kLate, then both run `op`; rank 0 checks what its wait cost.
void late_peer(distcomm::ProcessGroup& world, const std::string& what, const std::function<void()>& op) {
  world.barrier()->wait();
  if (world.rank() == 1) std::this_thread::sleep_for(kLate);
  const double cpu0 = process_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  op();
  const double cpu = process_cpu_seconds() - cpu0, wall = seconds_since(t0);
  if (world.rank() != 0) return;
  std::printf("rank 0: blocked %.2f s in %s, %.3f CPU s\n", wall, what.c_str(), cpu);
  std::fflush(stdout);
  if (wall < 2.5) throw std::runtime_error(what + " ended after " + std::to_string(wall) + " s: rank 1 was not late");
  if (cpu > kMaxCpuSeconds) {
    throw std::runtime_error("waiting " + std::to_string(wall) + " s in " + what + " for a late peer took " +
                             std::to_string(cpu) + " CPU s (at most " + std::to_string(kMaxCpuSeconds) +
                             "): the waiter keeps polling MPI");
  }
}

}  // namespace

int main() {
  return distcomm::run_main("waiting_cpu", [] {
    distcomm::InitOptions o;
    o.backend = "mpi";
    o.timeout = std::chrono::seconds(60);
    distcomm::ProcessGroupPtr pg = distcomm::init_process_group(o);
    if (pg->size() != 2) throw std::runtime_error("run with 2 ranks");
    const int rank = pg->rank();
    late_peer(*pg, "barrier", [&] { pg->barrier()->wait(); });
    late_peer(*pg, "all_reduce", [&] {
      distcomm::Tensor x = distcomm::Tensor::of({1.f, 2.f});
      pg->all_reduce(x)->wait();
      if (x.item(0) != 2.f || x.item(1) != 4.f) throw std::runtime_error("all_reduce: wrong sum");
    });
    late_peer(*pg, "recv", [&] {
      distcomm::Tensor x = distcomm::Tensor::of({static_cast<float>(rank)});
      if (rank == 0) {
        pg->recv(x, 1)->wait();
        if (x.item() != 1.f) throw std::runtime_error("recv: wrong value");
      } else {
        pg->send(x, 0)->wait();
      }
    });
    // Several waiting threads: one polls, the others sleep until their op ends.
    std::vector<distcomm::ProcessGroupPtr> groups;
    for (int t = 0; t < 4; ++t) groups.push_back(pg->new_group({0, 1}));
    late_peer(*pg, "4 threads' barriers", [&] {
      std::vector<std::thread> threads;
      std::vector<std::string> errors(groups.size());
      for (size_t t = 0; t < groups.size(); ++t) {
        threads.emplace_back([&, t] {
          try {
            groups[t]->barrier()->wait();
          } catch (const std::exception& e) {
            errors[t] = e.what();
          }
        });
      }
      for (auto& thread : threads) thread.join();
      for (const auto& error : errors) {
        if (!error.empty()) throw std::runtime_error(error);
      }
    });
    pg->barrier()->wait();
    if (rank == 0) std::printf("waiting_cpu: OK\n");
    return 0;
  });
}
