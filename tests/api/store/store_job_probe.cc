// A rank for the store's job tests, started by tools/launch:
//
//   store_job_probe <gate file> <rounds after the gate>
//
// Joins the job (init_process_group from the launcher's environment), writes its pid to
// "<gate file>.pid<rank>", prints "ready <rank>", then runs rounds of an all_reduce and a store add until the gate
// file exists, then the given number of rounds more, checks every sum, and prints
// "done <rank> <rounds>". Any failure is one line "error after <ms> ms: ..." on stderr
// (the time since the program started) and exit code 1.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>

#include "api/errors.h"
#include "api/init.h"
#include "api/tensor.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: store_job_probe <gate file> <rounds after the gate>\n");
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    distcomm::InitOptions init;
    init.timeout = std::chrono::seconds(60);
    distcomm::ProcessGroupPtr pg = distcomm::init_process_group(init);
    std::ofstream(std::string(argv[1]) + ".pid" + std::to_string(pg->rank())) << ::getpid();
    std::printf("ready %d\n", pg->rank());
    std::fflush(stdout);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    int rounds = 0;
    int after_gate = -1;
    while (after_gate < std::atoi(argv[2])) {
      // The second element says whether this rank saw the gate: summed, every rank agrees
      // on the round the gate opened.
      const float saw_gate = ::access(argv[1], F_OK) == 0 ? 1.0f : 0.0f;
      distcomm::Tensor x = distcomm::Tensor::of({static_cast<float>(pg->rank() + 1), saw_gate});
      pg->all_reduce(x)->wait();
      const float* sum = x.data_as<float>();
      const float want = pg->size() * (pg->size() + 1) / 2.0f;
      if (sum[0] != want) {
        throw distcomm::Error("round " + std::to_string(rounds) + ": sum " + std::to_string(sum[0]) +
                              ", expected " + std::to_string(want));
      }
      pg->store()->add("probe/rounds", 1);
      ++rounds;
      if (after_gate >= 0 || sum[1] > 0) ++after_gate;
      if (std::chrono::steady_clock::now() > deadline) throw distcomm::Timeout("the gate did not open in 60 s");
    }
    std::printf("done %d %d\n", pg->rank(), rounds);
    return 0;
  } catch (const std::exception& e) {
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "error after %lld ms: %s\n", static_cast<long long>(ms), e.what());
    return 1;
  }
}
