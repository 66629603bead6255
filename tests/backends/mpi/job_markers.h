// Handshakes between the ranks of an mpirun test job through files, for tests whose ranks
// cannot talk through distcomm or MPI (one of them has not started either): a rank writes a
// marker when it reaches a point, others wait for it. Nothing depends on a sleep being
// long enough; every wait gives up after kMarkerPatience, saying so.
//
// The files live in $TEST_TMPDIR (or /tmp), named after the mpirun job (PMIX_NAMESPACE), so
// that two jobs never read each other's markers.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace distcomm {
namespace testing {

constexpr std::chrono::seconds kMarkerPatience{120};

// This process's rank in the mpirun job.
inline int job_rank() {
  const char* r = std::getenv("OMPI_COMM_WORLD_RANK");
  return r ? std::atoi(r) : 0;
}

inline std::string marker_path(const std::string& name, int rank) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const char* job = std::getenv("PMIX_NAMESPACE");
  return std::string(dir ? dir : "/tmp") + "/distcomm_marker_" + (job ? job : "nojob") + "_" + name + "_" +
         std::to_string(rank);
}

// Written whole under another name first: a reader never sees half a marker.
inline void write_marker(const std::string& name) {
  const std::string path = marker_path(name, job_rank());
  {
    std::ofstream out(path + ".tmp");
    out << ::getpid() << "\n";
  }
  std::rename((path + ".tmp").c_str(), path.c_str());
}

// The pid each of `ranks` wrote into its marker, once all have; empty after kMarkerPatience.
inline std::vector<pid_t> wait_for_markers(const std::string& name, const std::vector<int>& ranks) {
  const auto give_up = std::chrono::steady_clock::now() + kMarkerPatience;
  std::vector<pid_t> pids;
  for (int r : ranks) {
    for (;;) {
      std::ifstream in(marker_path(name, r));
      long pid = 0;
      if (in >> pid) {
        pids.push_back(static_cast<pid_t>(pid));
        break;
      }
      if (std::chrono::steady_clock::now() > give_up) {
        std::fprintf(stderr, "rank %d: gave up waiting for rank %d's marker '%s'\n", job_rank(), r, name.c_str());
        return {};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return pids;
}

// Whether the process has ended (gone, or a zombie its parent has not reaped yet).
inline bool process_ended(pid_t pid) {
  if (::kill(pid, 0) != 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_text, comm, state;
  return (stat >> pid_text >> comm >> state) && state == "Z";
}

}  // namespace testing
}  // namespace distcomm
