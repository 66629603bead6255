// raw_mpi_collectives: Open MPI's own collectives, timed with nothing of distcomm in the
// process, to compare distcomm's backends against as a separate job.
//
//   mpirun -np 2 raw_mpi_collectives --op=all_gather 8 65536 1048576
//   raw_mpi_collectives --op=memcpy 67108864        (one process: a single-thread memcpy)
//
// Ops: all_reduce (MPI_Allreduce, float32 sum; the same measurement as
// ../shared/anchors/raw_mpi_bench.cc), all_gather (MPI_Allgather), reduce_scatter
// (MPI_Reduce_scatter_block, sum), broadcast (MPI_Bcast from rank 0), memcpy. Sizes are
// laid out as tools/bench lays them out (the larger buffer of one rank, float32), and busbw
// uses nccl-tests' factors, so the lines compare with bench's rows. Per size: 3 warm-up
// calls, a barrier, then `iters` calls (200 below 1 MiB, 10 from 1 MiB: the anchor's);
// time_us is the slowest rank's wall time over the calls divided by their number, as
// tools/bench reports it (rank 0 alone would understate a broadcast: its root returns once
// its eager sends are queued, before the data has arrived anywhere). One line per size:
//   raw-mpi op=all_gather n=2 bytes=65536 time_us=12.3 algbw=5.33 busbw=2.66
// Build: mpicxx -O2 -std=c++17 raw_mpi_collectives.cc (or bazel build -c opt
// //tools/bench/reference:raw_mpi_collectives).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Buffers {
  std::vector<float> send, recv;
};

// Elements of the send and receive buffers for `bytes` (the larger buffer) and n ranks.
Buffers buffers_for(const std::string& op, long bytes, int n) {
  const size_t total = bytes / 4 > 0 ? static_cast<size_t>(bytes / 4) : 1;
  const size_t chunk = total / n > 0 ? total / n : 1;
  Buffers b;
  if (op == "all_gather") {
    b.send.assign(chunk, 1.0f);
    b.recv.resize(chunk * n);
  } else if (op == "reduce_scatter") {
    b.send.assign(chunk * n, 1.0f);
    b.recv.resize(chunk);
  } else {
    b.send.assign(total, 1.0f);
    b.recv.resize(total);
  }
  return b;
}

double bus_factor(const std::string& op, int n) {
  if (op == "all_reduce") return 2.0 * (n - 1) / n;
  if (op == "all_gather" || op == "reduce_scatter") return 1.0 * (n - 1) / n;
  return 1.0;
}

void call(const std::string& op, Buffers& b) {
  const int send = static_cast<int>(b.send.size()), recv = static_cast<int>(b.recv.size());
  if (op == "all_reduce") {
    MPI_Allreduce(b.send.data(), b.recv.data(), send, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  } else if (op == "all_gather") {
    MPI_Allgather(b.send.data(), send, MPI_FLOAT, b.recv.data(), send, MPI_FLOAT, MPI_COMM_WORLD);
  } else if (op == "reduce_scatter") {
    MPI_Reduce_scatter_block(b.send.data(), b.recv.data(), recv, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  } else if (op == "broadcast") {
    MPI_Bcast(b.send.data(), send, MPI_FLOAT, 0, MPI_COMM_WORLD);
  } else {
    std::memcpy(b.recv.data(), b.send.data(), b.send.size() * sizeof(float));
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string op = "all_reduce";
  std::vector<long> sizes;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--op=", 5) == 0) {
      op = argv[i] + 5;
    } else {
      sizes.push_back(std::atol(argv[i]));
    }
  }
  const bool known = op == "all_reduce" || op == "all_gather" || op == "reduce_scatter" || op == "broadcast" ||
                     op == "memcpy";
  if (!known) {
    std::fprintf(stderr, "raw_mpi_collectives: unknown --op=%s (all_reduce, all_gather, reduce_scatter, broadcast, "
                         "memcpy)\n", op.c_str());
    return 2;
  }
  if (sizes.empty()) sizes = {8, 65536, 1 << 20, 16 << 20, 64 << 20};
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  for (long bytes : sizes) {
    Buffers b = buffers_for(op, bytes, n);
    for (int i = 0; i < 3; ++i) call(op, b);
    const int iters = bytes >= (1 << 20) ? 10 : 200;
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) call(op, b);
    const double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
    double s = mine;
    MPI_Allreduce(&mine, &s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const size_t larger = std::max(b.send.size(), b.recv.size()) * sizeof(float);
    const double algbw = larger / s / 1e9;
    if (rank == 0) {
      std::printf("raw-mpi op=%s n=%d bytes=%zu time_us=%.2f algbw=%.2f busbw=%.2f\n", op.c_str(), n, larger, s * 1e6,
                  algbw, algbw * bus_factor(op, n));
      std::fflush(stdout);
    }
  }
  MPI_Finalize();
  return 0;
}
