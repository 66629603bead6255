// point_to_point: two ranks pass a tensor back and forth, first with blocking send/recv,
// then with non-blocking ones that overlap with other work.
//
//   $ bazel run //examples:point_to_point -- --nproc=2
//   rank 0: sent 0, got back 1; sent 2, got back 3; sent 4, got back 5
//   rank 1: got 0, sent back 1; got 2, sent back 3; got 4, sent back 5
//   rank 0: exchanged without blocking: sent 0, received 1000
//   rank 1: exchanged without blocking: sent 1000, received 0
//
// Ranks pair up as (0, 1), (2, 3)...; with an odd number of ranks the last one sits out.
#include <gflags/gflags.h>

#include <sstream>

#include <distcomm/api/init.h>
#include <distcomm/api/logging.h>
#include <distcomm/api/run_main.h>
#include "examples/self_launch.h"

DEFINE_int32(rounds, 3, "ping-pong rounds");

using distcomm::Tensor;

int main(int argc, char** argv) {
  return distcomm::run_main("point_to_point", [&] {
    // Run by hand, this starts --nproc copies of the program and exits; each copy is a rank.
    distcomm::InitOptions init = distcomm::examples::self_launch(argc, argv, /*default_nproc=*/2);
    distcomm::ProcessGroupPtr pg = distcomm::init_process_group(init);
    const int rank = pg->rank();
    const bool pinger = rank % 2 == 0;
    const int partner = pinger ? rank + 1 : rank - 1;
    std::ostringstream report;
    report << "rank " << rank << ": ";

    if (partner >= pg->size()) {
      // ordered_print is collective: a rank sitting out still takes part in both prints.
      report << "no partner, sitting out";
      distcomm::ordered_print(*pg, report.str(), /*prefix=*/false);
      distcomm::ordered_print(*pg, report.str(), /*prefix=*/false);
      return 0;
    }

    // Blocking ping-pong: send(...)->wait() returns once the tensor may be reused, and
    // recv(...)->wait() once it has arrived. The pinger speaks first, so nobody waits forever.
    Tensor ball = Tensor::zeros({1});
    for (int round = 0; round < FLAGS_rounds; ++round) {
      if (round > 0) report << "; ";
      if (pinger) {
        ball.fill(2 * round);
        pg->send(ball, partner)->wait();
        pg->recv(ball, partner)->wait();
        report << "sent " << 2 * round << ", got back " << ball.item();
      } else {
        pg->recv(ball, partner)->wait();
        report << "got " << ball.item();
        ball.fill(ball.item() + 1);
        pg->send(ball, partner)->wait();
        report << ", sent back " << ball.item();
      }
    }
    distcomm::ordered_print(*pg, report.str(), /*prefix=*/false);

    // Non-blocking exchange: both sides post their receive and their send at once, are free
    // to compute while the bytes move, and wait only when they need the result. Neither
    // tensor may be touched until its Work is done.
    Tensor outgoing = Tensor::of({pinger ? 0.f : 1000.f});
    Tensor incoming = Tensor::zeros({1});
    distcomm::WorkPtr receiving = pg->recv(incoming, partner);
    distcomm::WorkPtr sending = pg->send(outgoing, partner);
    // ... computation that needs neither tensor would run here, overlapped with the transfer ...
    sending->wait();
    receiving->wait();
    std::ostringstream exchange;
    exchange << "rank " << rank << ": exchanged without blocking: sent " << outgoing.item() << ", received "
             << incoming.item();
    distcomm::ordered_print(*pg, exchange.str(), /*prefix=*/false);
    return 0;
  });
}
