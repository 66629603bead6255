// Split point-to-point transfers (max_count_per_call = kPiece, 2 ranks) that the receiver
// must refuse whole, under mpirun (BUILD runs it over TCP alone and over vader alone).
//
// Rank 1 sends, rank 0 receives into a tensor of another total or dtype. Each recv must end
// in InvalidArgument naming the sender's total, with every element of the tensor untouched;
// the sender's send must complete; and the next two transfers between the same ranks on the
// same tag (one split, one unsplit) must arrive exact. The backend compared the messages
// piece by piece: the pieces before the one that differed landed in the tensor, the ones
// after it were left queued for the next recv (wrong data there, or a refusal that was not
// its own), and a recv that was a whole multiple of the other side's pieces was not refused
// at all (it took the first pieces as its whole message). Pieces are 128 KiB, beyond
// Open MPI's eager sizes (64 KiB over tcp, 4 KiB over vader), so the drained pieces go by
// rendezvous: never received truncated (refused_recv.cc says why).
//
// Exits non-zero naming the first check that failed.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "api/errors.h"
#include "api/init.h"
#include "api/process_group.h"
#include "api/run_main.h"
#include "api/tensor.h"

namespace distcomm {
namespace {

constexpr int64_t kPiece = 1 << 15;  // max_count_per_call: 128 KiB of int32 or float32

int g_rank = -1;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "rank %d FAILED: %s\n", g_rank, what.c_str());
  std::fflush(stderr);
  std::exit(1);
}

// n elements of dtype whose element i is base + i (exact in float32 for these sizes).
Tensor sequence(int64_t n, int base, DType dtype = DType::kInt32) {
  Tensor t = Tensor::empty({n}, dtype);
  if (dtype == DType::kInt32) {
    auto* p = static_cast<int32_t*>(t.data());
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(base + i);
  } else {
    auto* p = static_cast<float*>(t.data());
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(base + i);
  }
  return t;
}

void expect_sequence(const std::string& what, const Tensor& t, int base) {
  const auto* p = static_cast<const int32_t*>(t.data());
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (p[i] != base + i) {
      fail(what + ": element " + std::to_string(i) + " of " + std::to_string(t.numel()) + " is " +
           std::to_string(p[i]) + ", want " + std::to_string(base + i));
    }
  }
}

struct Case {
  const char* what;
  int64_t sent;
  DType sent_dtype;
  int64_t received;  // int32
  bool any_source;
};

WorkPtr receive(ProcessGroup& pg, Tensor& t, bool any_source) {
  return any_source ? pg.recv_any_source(t) : pg.recv(t, 1);
}

void refused_whole(ProcessGroup& pg, const Case& c) {
  const std::string what = c.what;
  constexpr int64_t kNextSplit = 5 * kPiece / 2, kNextSmall = kPiece / 2;
  if (pg.rank() == 1) {
    // Every send completes: the receiver drains what it refuses.
    pg.send(sequence(c.sent, 1000, c.sent_dtype), 0)->wait();
    pg.send(sequence(kNextSplit, 7), 0)->wait();
    pg.send(sequence(kNextSmall, 9), 0)->wait();
  } else if (pg.rank() == 0) {
    Tensor t = Tensor::empty({c.received}, DType::kInt32);
    auto* p = static_cast<int32_t*>(t.data());
    for (int64_t i = 0; i < c.received; ++i) p[i] = -3;
    std::string refusal;
    try {
      WorkPtr w = receive(pg, t, c.any_source);
      w->wait();
      fail(what + ": was not refused");
    } catch (const InvalidArgument& e) {
      refusal = e.what();
    } catch (const std::exception& e) {
      fail(what + ": threw another error: " + e.what());
    }
    // The text is checked last, so that a failure says first what went wrong with the data.
    for (int64_t i = 0; i < c.received; ++i) {
      if (p[i] != -3) fail(what + ": the refused recv wrote element " + std::to_string(i) + " of its tensor");
    }
    // Nothing of the refused message is left for the next recvs from that rank.
    Tensor next = Tensor::zeros({kNextSplit}, DType::kInt32);
    WorkPtr w = receive(pg, next, c.any_source);
    w->wait();
    if (w->source_rank() != 1) fail(what + ", then a split recv: source rank " + std::to_string(w->source_rank()));
    expect_sequence(what + ", then a split recv", next, 7);
    Tensor small = Tensor::zeros({kNextSmall}, DType::kInt32);
    pg.recv(small, 1)->wait();
    expect_sequence(what + ", then an unsplit recv", small, 9);
    const std::string needle = "sends " + std::to_string(c.sent) + " " + dtype_name(c.sent_dtype);
    if (refusal.find(needle) == std::string::npos) fail(what + ": InvalidArgument without '" + needle + "': " + refusal);
    std::printf("rank 0 %s: refused whole, the next recvs exact\n", c.what);
  }
  pg.barrier()->wait();
}

// A group whose ranks have different max_count_per_call (rank 0 twice rank 1's): the recv
// follows the sender's pieces (its header), so matching transfers arrive exact either way.
void mixed_settings(ProcessGroup& world) {
  ProcessGroupOptions o;  // no store: MPI finds the peers
  o.rank = world.rank();
  o.size = world.size();
  o.backend = "mpi";
  o.group_name = "mixed_max_count";
  o.timeout = std::chrono::seconds(30);
  o.backend_config["max_count_per_call"] = std::to_string(world.rank() == 0 ? 2 * kPiece : kPiece);
  ProcessGroupPtr pg = ProcessGroup::create(o);
  // 3 pieces on rank 1, which rank 0 would take in 2; 1.5 pieces' worth unsplit from rank
  // 0, which rank 1 would take in 2.
  constexpr int64_t kFrom1 = 3 * kPiece, kFrom0 = 3 * kPiece / 2;
  if (pg->rank() == 1) {
    pg->send(sequence(kFrom1, 11), 0)->wait();
    Tensor t = Tensor::zeros({kFrom0}, DType::kInt32);
    pg->recv(t, 0)->wait();
    expect_sequence("with mixed settings, 1.5 pieces' worth unsplit from rank 0", t, 13);
  } else {
    Tensor t = Tensor::zeros({kFrom1}, DType::kInt32);
    pg->recv(t, 1)->wait();
    expect_sequence("with mixed settings, 3 pieces from rank 1", t, 11);
    pg->send(sequence(kFrom0, 13), 1)->wait();
  }
  pg->barrier()->wait();
  std::printf("rank %d mixed max_count_per_call: exact\n", pg->rank());
}

}  // namespace
}  // namespace distcomm

// split_refused [N]: every case, or case N alone (0-based, to see one case fail by hand).
int main(int argc, char** argv) {
  using namespace distcomm;
  return run_main("split_refused", [&]() -> int {
    InitOptions o;
    o.backend = "mpi";
    o.timeout = std::chrono::seconds(30);
    o.backend_config["max_count_per_call"] = std::to_string(kPiece);
    ProcessGroupPtr pg = init_process_group(o);
    g_rank = pg->rank();
    if (pg->size() != 2) fail("run it with 2 ranks");
    const Case cases[] = {
        {"3.5 pieces' worth into a recv of 2.5", 7 * kPiece / 2, DType::kInt32, 5 * kPiece / 2, false},
        {"2.5 pieces' worth into a recv of 3", 5 * kPiece / 2, DType::kInt32, 3 * kPiece, false},
        {"2 pieces' worth into a recv of 3", 2 * kPiece, DType::kInt32, 3 * kPiece, false},
        {"an unsplit message of 1 piece into a split recv of 2", kPiece, DType::kInt32, 2 * kPiece, false},
        {"2 pieces' worth into an unsplit recv of 1", 2 * kPiece, DType::kInt32, kPiece, false},
        {"a split float32 message into an int32 recv of its count", 2 * kPiece, DType::kFloat32, 2 * kPiece, false},
        {"recv_any_source: 3 pieces' worth into a recv of 1.5", 3 * kPiece, DType::kInt32, 3 * kPiece / 2, true},
        {"recv_any_source: 2 pieces' worth into a recv of 3", 2 * kPiece, DType::kInt32, 3 * kPiece, true},
    };
    const int only = argc > 1 ? std::atoi(argv[1]) : -1;
    for (int i = 0; i < static_cast<int>(sizeof(cases) / sizeof(cases[0])); ++i) {
      if (only < 0 || i == only) refused_whole(*pg, cases[i]);
    }
    mixed_settings(*pg);
    Tensor s = Tensor::of({1.0f});
    pg->all_reduce(s)->wait();
    if (s.item() != 2) fail("all_reduce after the refused recvs");
    std::printf("rank %d split refusals: all drained\n", g_rank);
    destroy_process_group();
    return 0;
  });
}
