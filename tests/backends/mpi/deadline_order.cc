// An op's deadline holds whatever the deadlines of the ops beside it: a group's queue looks
// for expired ops only once the earliest deadline it knows has passed (op_queue.h,
// next_expiry_), so that knowledge must follow the ops that come and go.
//   1. An op with an early deadline ends in time (a send rank 1 receives); a recv issued
//      beside it, that rank 1 never sends to, must still time out at its own, later deadline
//      (the earliest known deadline passes with nothing expired: it must move on to the recv's).
//   2. A recv with a 60 s deadline is pending; a recv issued after it with a 2 s one must
//      time out at 2 s, not at 60 (a later op's earlier deadline must lower it).
// Each wait is bounded (Work::wait's own timeout), so a deadline missed fails the check
// instead of hanging. The recvs given up are cancelled, so both ranks then end normally.
#include <chrono>
#include <cstdio>

#include "api/errors.h"
#include "api/init.h"
#include "api/tensor.h"
#include "tests/backends/mpi/job_markers.h"
#include "tests/backends/mpi/timeout_verdict.h"

int main() {
  using namespace distcomm;
  InitOptions o;
  o.backend = "mpi";
  o.timeout = std::chrono::seconds(20);
  ProcessGroupPtr pg = init_process_group(o);
  auto first = pg->new_group({0, 1});
  auto second = pg->new_group({0, 1});
  Tensor t = Tensor::zeros({4});
  P2POptions quick;
  quick.tag = 1;
  quick.timeout = std::chrono::seconds(1);
  if (pg->rank() == 1) {
    P2POptions patient = quick;  // rank 0's send ends at once (eager); this recv may start late
    patient.timeout = std::chrono::seconds(20);
    first->recv(t, 0, patient)->wait();
    // Until rank 0 has its verdicts: it times out recvs from this rank meanwhile.
    return testing::wait_for_markers("checked", {0}).empty() ? 1 : 0;
  }
  const auto bounded = std::chrono::seconds(15);
  WorkPtr sent = first->send(t, 1, quick);
  P2POptions later;
  later.tag = 2;
  later.timeout = std::chrono::seconds(3);
  WorkPtr never = first->recv(t, 1, later);
  sent->wait();
  bool ok = testing::expect_timeout(
      "rank 0", "recv beside an op that ended before its deadline", [&] { never->wait(bounded); },
      "rank 1 of the group has not sent it", 2.5, 12);
  P2POptions slow;
  slow.tag = 3;
  slow.timeout = std::chrono::seconds(60);
  WorkPtr pending = second->recv(t, 1, slow);
  P2POptions soon;
  soon.tag = 4;
  soon.timeout = std::chrono::seconds(2);
  ok = testing::expect_timeout("rank 0", "recv with an earlier deadline than the one before it",
                               [&] { second->recv(t, 1, soon)->wait(bounded); },
                               "rank 1 of the group has not sent it", 1.5, 12) &&
       ok;
  testing::write_marker("checked");
  return ok ? 0 : 1;
}
