#include "tests/backends/mismatch/mismatch_cases.h"

#include <chrono>
#include <vector>

#include "api/errors.h"

namespace distcomm {
namespace mismatch {
namespace {

using std::chrono::milliseconds;

Tensor floats(int64_t n) { return Tensor::zeros({n}); }

}  // namespace

std::function<void()> all_reduce_counts(ProcessGroup& pg) {
  return [&pg] {
    pg.barrier()->wait();
    Tensor t = floats(pg.rank() == 0 ? 10 : 20);
    pg.all_reduce(t)->wait();
  };
}

std::function<void()> all_reduce_dtypes(ProcessGroup& pg, DType other) {
  return [&pg, other] {
    pg.barrier()->wait();
    Tensor t = Tensor::zeros({10}, pg.rank() == 0 ? DType::kFloat32 : other);
    pg.all_reduce(t)->wait();
  };
}

std::function<void()> all_reduce_ops(ProcessGroup& pg) {
  return [&pg] {
    pg.barrier()->wait();
    Tensor t = floats(10);
    AllReduceOptions o;
    o.op = pg.rank() == 0 ? ReduceOp::SUM : ReduceOp::MAX;
    pg.all_reduce(t, o)->wait();
  };
}

std::function<void()> all_reduce_or_broadcast(ProcessGroup& pg) {
  return [&pg] {
    pg.barrier()->wait();
    Tensor t = floats(10);
    if (pg.rank() == 0) {
      pg.all_reduce(t)->wait();
    } else {
      pg.broadcast(t)->wait();
    }
  };
}

std::function<void()> broadcast_roots(ProcessGroup& pg, Tensor* result) {
  return [&pg, result] {
    pg.barrier()->wait();
    Tensor t = floats(10);
    t.fill(pg.rank() + 1);  // whoever receives can tell whose tensor came
    BroadcastOptions o;
    o.root = pg.rank() == 0 ? 0 : 1;
    pg.broadcast(t, o)->wait();
    if (result) *result = t;
  };
}

std::function<void()> all_to_all_splits(ProcessGroup& pg) {
  return [&pg] {
    pg.barrier()->wait();
    Tensor in = floats(6), out = floats(6);
    const std::vector<int64_t> mine = pg.rank() == 2 ? std::vector<int64_t>{1, 3, 2} : std::vector<int64_t>{2, 2, 2};
    pg.all_to_all_single(out, in, {2, 2, 2}, mine)->wait();
  };
}

void p2p_sizes(ProcessGroup& pg, int64_t sent, int64_t received, double within, bool sender_told) {
  const std::string smaller = std::to_string(std::min(sent, received));
  const std::string larger = std::to_string(std::max(sent, received));
  auto names_both = [&](const std::string& msg) {
    for (int64_t n : {sent, received}) {
      const std::string count = std::to_string(n) + " float32 (" + std::to_string(4 * n) + " bytes)";
      EXPECT_NE(msg.find(count), std::string::npos) << "names " << count << ": " << msg;
    }
  };
  pg.barrier()->wait();
  if (pg.rank() == 2) {
    wait_for_done(pg, {0, 1});
    return;
  }
  if (pg.rank() == 0) {
    Tensor t = floats(sent);
    t.fill(7);
    if (sender_told) {
      names_both(expect_failure_within<InvalidArgument>([&] { pg.send(t, 1)->wait(); }, 0, within, "the send"));
    } else {
      const auto start = std::chrono::steady_clock::now();
      pg.send(t, 1)->wait();
      EXPECT_LT(seconds_since(start), within) << "the send";
    }
  } else {
    Tensor t = floats(received);
    names_both(expect_failure_within<InvalidArgument>([&] { pg.recv(t, 0)->wait(); }, 0, within, "the recv"));
    // Never a partial fill: nothing of the message landed.
    for (int64_t i = 0; i < received; ++i) EXPECT_EQ(t.item(i), 0) << "element " << i;
  }
  mark_done(pg);
}

void queued_op_times_out(ProcessGroup& pg) {
  pg.barrier()->wait();
  if (pg.rank() == 2) {
    wait_for_done(pg, {0, 1});
    return;
  }
  Tensor a = floats(10), b = floats(10);
  WorkPtr first = pg.all_reduce(a);  // rank 2 never joins: waits for the group's timeout
  AllReduceOptions o;
  o.timeout = milliseconds(1500);
  const std::string msg =
      expect_failure_within<Timeout>([&] { pg.all_reduce(b, o)->wait(); }, 1.4, 8, "the op queued with a 1.5 s timeout");
  EXPECT_NE(msg.find("1500 ms"), std::string::npos) << msg;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(first->wait(), Error) << "the op in front ends with the group's failure";
  EXPECT_LT(seconds_since(start), 3.0);
  mark_done(pg);
}

void detail_finds_every_collective_case(ProcessGroup& pg, double within) {
  struct Case {
    const char* what;
    std::function<void()> op;
    const char* names;  // what the table must show
  };
  const std::vector<Case> cases = {
      {"counts", all_reduce_counts(pg), "float32[20]"},
      {"same bytes, other dtype", all_reduce_dtypes(pg, DType::kInt32), "int32[10]"},
      {"float64 vs float32", all_reduce_dtypes(pg, DType::kFloat64), "float64[10]"},
      {"sum vs max", all_reduce_ops(pg), " max"},
      {"all_reduce vs broadcast", all_reduce_or_broadcast(pg), "broadcast #"},
      {"roots", broadcast_roots(pg), "root 1"},
      {"all_to_all splits", all_to_all_splits(pg), "rank 2 sends 1 elements to rank 0, which expects 2"},
  };
  for (const Case& c : cases) {
    const std::string msg = expect_failure_within<Desync>(c.op, 0, within, c.what);
    EXPECT_NE(msg.find("DISTCOMM_DEBUG=DETAIL"), std::string::npos) << c.what << ": " << msg;
    EXPECT_NE(msg.find(c.names), std::string::npos) << c.what << ": " << msg;
  }
  // The check threw before any rank issued the op: the group is still usable.
  Tensor t = floats(3);
  t.fill(1);
  pg.all_reduce(t)->wait();
  EXPECT_EQ(t.item(2), pg.size());
}

namespace {

// Rank 0 runs `send` (float32[4] to rank 1), rank 1 `recv` (from rank 0 into the int32[4] it
// is given) and rank 2 waits for them: the recv must fail naming both dtypes.
void dtype_mismatch(ProcessGroup& pg, double within, bool sender_told, const char* what,
                    const std::function<void(const Tensor&)>& send, const std::function<void(Tensor&)>& recv,
                    const char* names = "") {
  if (pg.rank() == 2) {
    wait_for_done(pg, {0, 1});
    return;
  }
  if (pg.rank() == 0) {
    Tensor t = floats(4);
    if (sender_told) {
      expect_failure_within<InvalidArgument>([&] { send(t); }, 0, within, what);
    } else {
      send(t);
    }
  } else {
    Tensor t = Tensor::zeros({4}, DType::kInt32);
    const std::string msg = expect_failure_within<InvalidArgument>([&] { recv(t); }, 0, within, what);
    EXPECT_NE(msg.find("int32"), std::string::npos) << msg;
    EXPECT_NE(msg.find("float32"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank 0"), std::string::npos) << "names the sender: " << msg;
    EXPECT_NE(msg.find(names), std::string::npos) << msg;
  }
  mark_done(pg);
}

}  // namespace

void p2p_dtypes(ProcessGroup& pg, double within, const char* names, bool sender_told) {
  pg.barrier()->wait();
  dtype_mismatch(
      pg, within, sender_told, "recv int32 from a float32 send", [&](const Tensor& t) { pg.send(t, 1)->wait(); },
      [&](Tensor& t) { pg.recv(t, 0)->wait(); }, names);
}

void detail_any_source(ProcessGroup& pg, double within, const char* names, bool sender_told) {
  pg.barrier()->wait();
  if (pg.rank() == 1) {
    std::vector<int> sources;
    for (int i = 0; i < 2; ++i) {
      Tensor t = floats(3);
      WorkPtr w = pg.recv_any_source(t);
      w->wait();
      const int source = w->source_rank();
      EXPECT_TRUE(source == 0 || source == 2) << source;
      EXPECT_EQ(t.item(2), source + 1) << "from rank " << source;
      sources.push_back(source);
    }
    EXPECT_NE(sources[0], sources[1]) << "one message from each sender";
  } else {
    Tensor t = floats(3);
    t.fill(pg.rank() + 1);
    pg.send(t, 1)->wait();
  }
  pg.barrier()->wait();
  P2POptions o;
  o.tag = 1;
  dtype_mismatch(
      pg, within, sender_told, "recv_any_source int32 from a float32 send",
      [&](const Tensor& t) { pg.send(t, 1, o)->wait(); },
      [&](Tensor& t) {
        pg.recv_any_source(t, o)->wait();
      },
      names);
}

void detail_batch(ProcessGroup& pg, double within, const char* names, bool sender_told) {
  pg.barrier()->wait();
  const int right = (pg.rank() + 1) % pg.size(), left = (pg.rank() + pg.size() - 1) % pg.size();
  Tensor out = floats(2), in = floats(2);
  out.fill(pg.rank() + 1);
  std::vector<P2POp> ring = {P2POp::send(out, right), P2POp::recv(in, left)};
  pg.batch_isend_irecv(ring)->wait();
  EXPECT_EQ(in.item(1), left + 1) << "rank " << left << "'s values";
  pg.barrier()->wait();
  P2POptions o;
  o.tag = 1;
  dtype_mismatch(
      pg, within, sender_told, "a batch's recv int32 from a float32 send",
      [&](const Tensor& t) {
        std::vector<P2POp> ops = {P2POp::send(t, 1)};
        pg.batch_isend_irecv(ops, o)->wait();
      },
      [&](Tensor& t) {
        std::vector<P2POp> ops = {P2POp::recv(t, 0)};
        pg.batch_isend_irecv(ops, o)->wait();
      },
      names);
}

}  // namespace mismatch
}  // namespace distcomm
