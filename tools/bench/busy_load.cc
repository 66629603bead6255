// busy_load: what a training job's compute does to the communication threads -- a thread
// per core (or --threads N) that keeps its core busy at normal priority, for --seconds S
// (0: until killed). Run it beside a benchmark to measure communication on a busy host:
//
//   bazel build -c opt //tools/bench:busy_load
//   bazel-bin/tools/bench/busy_load --seconds=60 &
//   bazel-bin/tools/bench/overhead/gloo_overhead --nproc=2 --sizes=8,1M
//
// Each thread does arithmetic on a small array of its own (no memory traffic to speak of,
// no system calls), so what the benchmark loses is CPU time, not memory bandwidth. Prints
// one line when it ends: the threads, the seconds and the work done per thread.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

std::atomic<bool> g_stop{false};

void on_signal(int) { g_stop.store(true); }

// A number from "--name=value", or fallback when absent. Exits 2 on a malformed one.
long flag(int argc, char** argv, const char* name, long fallback) {
  const std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) != 0) continue;
    char* end = nullptr;
    const long v = std::strtol(argv[i] + prefix.size(), &end, 10);
    if (*end != '\0' || v < 0) {
      std::fprintf(stderr, "busy_load: %s expects a non-negative integer, got '%s'\n", name, argv[i] + prefix.size());
      std::exit(2);
    }
    return v;
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--threads=", 10) != 0 && std::strncmp(argv[i], "--seconds=", 10) != 0) {
      std::fprintf(stderr, "busy_load: unknown argument '%s' (flags: --threads=N --seconds=S)\n", argv[i]);
      return 2;
    }
  }
  const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  const long threads = flag(argc, argv, "threads", cores > 0 ? cores : 1);
  const long seconds = flag(argc, argv, "seconds", 0);
  ::signal(SIGINT, on_signal);
  ::signal(SIGTERM, on_signal);
  std::vector<double> work(static_cast<size_t>(threads), 0.0);
  std::vector<std::thread> pool;
  for (long t = 0; t < threads; ++t) {
    pool.emplace_back([t, &work] {
      double a[64];
      for (int i = 0; i < 64; ++i) a[i] = i;
      double rounds = 0;
      while (!g_stop.load(std::memory_order_relaxed)) {
        for (int r = 0; r < 10000; ++r) {
          for (int i = 0; i < 64; ++i) a[i] = a[i] * 0.999999 + 1.0;
        }
        rounds += 1;
      }
      work[static_cast<size_t>(t)] = rounds + a[7] * 0;  // a[] used: not optimised away
    });
  }
  const auto start = std::chrono::steady_clock::now();
  while (!g_stop.load()) {
    if (seconds > 0 && std::chrono::steady_clock::now() - start >= std::chrono::seconds(seconds)) break;
    ::usleep(100000);
  }
  g_stop.store(true);
  for (auto& t : pool) t.join();
  double total = 0;
  for (double w : work) total += w;
  const double ran = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("busy_load: %ld threads for %.1f s, %.0f rounds of work per thread\n", threads, ran,
              threads > 0 ? total / static_cast<double>(threads) : 0.0);
  return 0;
}
