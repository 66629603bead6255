// Point-to-point transfers the mpi backend must refuse or split without harm, under mpirun
// (BUILD runs it over shared memory and over TCP alone):
//
//   refused: a recv whose tensor is smaller, or larger, than a message beyond MPI's eager
//     size (1 MiB; Open MPI's eager limits are 4 KiB over vader, 64 KiB over tcp), by recv
//     and by recv_any_source. Each must end in InvalidArgument on the receiver with the
//     tensor untouched, and the next transfer between the same ranks must deliver. The
//     backend discarded such a message by receiving it truncated into nothing: over TCP the
//     receiver died (SIGSEGV in mca_btl_tcp_frag_recv), over vader Open MPI printed
//     "Read -1, expected ..., errno = 14".
//   split (max_count_per_call=1000, 3 ranks): recv_any_source of 2500 elements, which the
//     sender sends in 3 calls, was refused on the receiver after the sender's calls went
//     out, and the next recv from that rank got the old message's first call. Now it is
//     received in pieces from one sender: two senders at once each arrive whole. And
//     all_gather / reduce_scatter / all_to_all over the limit per rank, which ran as if
//     there were none, are refused before anything is sent, as the docs say.
//
// Exits non-zero naming the first check that failed.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "api/errors.h"
#include "api/init.h"
#include "api/run_main.h"
#include "api/tensor.h"

namespace distcomm {
namespace {

int g_rank = -1;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "rank %d FAILED: %s\n", g_rank, what.c_str());
  std::fflush(stderr);
  std::exit(1);
}

// Runs fn, which must throw InvalidArgument whose text has `needle`.
void expect_invalid(const std::string& what, const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    if (std::string(e.what()).find(needle) == std::string::npos) fail(what + ": InvalidArgument without '" + needle + "': " + e.what());
    std::printf("rank %d %s: refused as it must\n", g_rank, what.c_str());
    return;
  } catch (const std::exception& e) {
    fail(what + ": threw another error: " + e.what());
  }
  fail(what + ": was not refused");
}

// A tensor of n int32 whose element i is base + i.
Tensor sequence(int64_t n, int base) {
  Tensor t = Tensor::empty({n}, DType::kInt32);
  for (int64_t i = 0; i < n; ++i) t.set_item(i, base + static_cast<double>(i));
  return t;
}

void expect_sequence(const std::string& what, const Tensor& t, int base) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (t.item(i) != base + static_cast<double>(i)) {
      fail(what + ": element " + std::to_string(i) + " is " + std::to_string(t.item(i)) + ", want " +
           std::to_string(base + i));
    }
  }
}

// Rank 1 sends kSent floats; rank 0 receives them into `received` floats, and must refuse.
// Then a correct transfer of the same ranks and tag must deliver.
void refused_then_usable(ProcessGroup& pg, const std::string& what, int64_t received, bool any_source) {
  constexpr int64_t kSent = 1 << 18;  // 1 MiB of float32
  if (pg.rank() == 1) {
    pg.send(Tensor::zeros({kSent}), 0)->wait();
  } else if (pg.rank() == 0) {
    Tensor t = Tensor::zeros({received});
    t.fill(3);
    expect_invalid(
        what,
        [&] {
          if (any_source) {
            pg.recv_any_source(t)->wait();
          } else {
            pg.recv(t, 1)->wait();
          }
        },
        "sends " + std::to_string(kSent) + " float32");
    if (t.item(0) != 3 || t.item(received - 1) != 3) fail(what + ": the refused recv wrote into the tensor");
  }
  // The next transfer between the same ranks, on the same tag, larger than the eager size too.
  if (pg.rank() == 1) {
    pg.send(sequence(kSent, 7), 0)->wait();
  } else if (pg.rank() == 0) {
    Tensor t = Tensor::zeros({kSent}, DType::kInt32);
    pg.recv(t, 1)->wait();
    expect_sequence(what + ", then the next recv", t, 7);
  }
  pg.barrier()->wait();
}

void refused(ProcessGroup& pg) {
  refused_then_usable(pg, "recv into a smaller tensor", 1 << 17, false);
  refused_then_usable(pg, "recv into a larger tensor", 1 << 19, false);
  refused_then_usable(pg, "recv_any_source into a larger tensor", 1 << 19, true);
  refused_then_usable(pg, "recv_any_source into a smaller tensor", 1 << 17, true);
}

constexpr int64_t kLimit = 1000;  // max_count_per_call in split mode

void split(ProcessGroup& pg) {
  const int n = pg.size();
  // Ranks 1 and 2 each send 2500 (3 calls) on one tag; rank 0 takes both from any rank.
  constexpr int64_t kCount = 2500;
  if (pg.rank() == 0) {
    Tensor a = Tensor::zeros({kCount}, DType::kInt32), b = Tensor::zeros({kCount}, DType::kInt32);
    WorkPtr wa = pg.recv_any_source(a), wb = pg.recv_any_source(b);
    wa->wait();
    wb->wait();
    const int sa = wa->source_rank(), sb = wb->source_rank();
    if (sa == sb || sa < 1 || sb < 1) fail("two recv_any_source got sources " + std::to_string(sa) + " and " + std::to_string(sb));
    expect_sequence("recv_any_source of 2500 (split) from rank " + std::to_string(sa), a, sa * 100000);
    expect_sequence("recv_any_source of 2500 (split) from rank " + std::to_string(sb), b, sb * 100000);
    // (The senders' next messages come after this barrier: before it, a recv from any rank
    // could take one of them as the first call of its own.)
    pg.barrier()->wait();
    // Nothing of those messages is left: the next recv from each gets its next message.
    for (int src = 1; src < n; ++src) {
      Tensor t = Tensor::zeros({kLimit}, DType::kInt32);
      pg.recv(t, src)->wait();
      expect_sequence("the recv after recv_any_source, from rank " + std::to_string(src), t, 5000 + src);
    }
    std::printf("rank 0 split recv_any_source: exact\n");
  } else {
    pg.send(sequence(kCount, pg.rank() * 100000), 0)->wait();
    pg.barrier()->wait();
    pg.send(sequence(kLimit, 5000 + pg.rank()), 0)->wait();
  }
  pg.barrier()->wait();

  // Ops that MPI cannot split, over the limit per rank: refused on every rank before sending.
  const int64_t over = kLimit + 500;
  expect_invalid("all_gather_into_tensor of 1500 per rank", [&] {
    Tensor in = Tensor::zeros({over}, DType::kInt32), out = Tensor::zeros({over * n}, DType::kInt32);
    pg.all_gather_into_tensor(out, in)->wait();
  }, "max_count_per_call (1000");
  expect_invalid("reduce_scatter_tensor of 1500 per rank", [&] {
    Tensor in = Tensor::zeros({over * n}, DType::kInt32), out = Tensor::zeros({over}, DType::kInt32);
    pg.reduce_scatter_tensor(out, in)->wait();
  }, "max_count_per_call (1000");
  expect_invalid("all_to_all_single of 1500 per peer", [&] {
    Tensor in = Tensor::zeros({over * n}, DType::kInt32), out = Tensor::zeros({over * n}, DType::kInt32);
    pg.all_to_all_single(out, in)->wait();
  }, "max_count_per_call (1000");
  // At the limit they run, exactly.
  Tensor in = sequence(kLimit, pg.rank() * 10000), out = Tensor::zeros({kLimit * n}, DType::kInt32);
  pg.all_gather_into_tensor(out, in)->wait();
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < kLimit; ++i) {
      if (out.item(r * kLimit + i) != r * 10000 + static_cast<double>(i)) fail("all_gather of 1000 per rank: wrong");
    }
  }
  Tensor s = Tensor::of({1.0f});
  pg.all_reduce(s)->wait();
  if (s.item() != n) fail("all_reduce after the refused ops");
  std::printf("rank %d split: ops over max_count_per_call refused, the group usable\n", pg.rank());
}

}  // namespace
}  // namespace distcomm

int main(int argc, char** argv) {
  using namespace distcomm;
  return run_main("refused_recv", [&]() -> int {
    const std::string mode = argc > 1 ? argv[1] : "";
    InitOptions o;
    o.backend = "mpi";
    o.timeout = std::chrono::seconds(30);
    if (mode == "split") o.backend_config["max_count_per_call"] = std::to_string(kLimit);
    ProcessGroupPtr pg = init_process_group(o);
    g_rank = pg->rank();
    if (mode == "refused" && pg->size() >= 2) {
      refused(*pg);
    } else if (mode == "split" && pg->size() == 3) {
      split(*pg);
    } else {
      fail("usage: refused_recv refused (2+ ranks) | split (3 ranks)");
    }
    std::printf("rank %d done\n", g_rank);
    destroy_process_group();
    return 0;
  });
}
