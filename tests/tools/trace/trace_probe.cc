// A distcomm program for the trace tests, run under tools/launch on gloo:
//   trace_probe skip     3+ ranks: three all_reduces, then rank 1 skips the fourth while
//                        the others time out in it (group timeout 3 s) and check that
//                        their dump (DISTCOMM_TRACE_DIR) was written before wait() threw;
//                        rank 1 stays in the group until they are through, waiting in
//                        a recv from rank 0 (tag 42) that nobody sends.
//   trace_probe sigusr1  rank 0 sends itself SIGUSR1 after six all_reduces, waits for its
//                        dump to appear, and the ranks go on for six more.
//   trace_probe launcher_sigusr1
//                        3 ranks, three all_reduces; then rank 0 sends SIGUSR1 to its
//                        launcher (as a user would, to a hung job) while ranks 1 and 2 wait
//                        in all_reduce #3, waits until every rank's dump says SIGUSR1 (in
//                        DISTCOMM_TRACE_DIR, else $TMPDIR/distcomm_trace), and the job goes
//                        on: all_reduce #3 and three more, and every rank exits 0.
//   trace_probe die      three all_reduces, then the last rank dies (SIGKILL) and the others
//                        sit in a long computation, until the launcher stops them.
//   trace_probe hang     3 ranks, three all_reduces; then rank 1 waits in a recv from rank 0
//                        (tag 42) that nobody sends while ranks 0 and 2 wait in all_reduce
//                        #3 without it, and rank 2 stops the job: SIGTERM to its launcher
//                        (trace_probe hang sigint: SIGINT, as a Ctrl-C).
//   trace_probe ok       three all_reduces, and the ranks exit 0.
//   trace_probe early    rank 0 exits 3 before making a group, while the others are still
//                        starting (60 s before theirs): they have no SIGUSR1 handler yet.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "api/errors.h"
#include "api/init.h"
#include "api/run_main.h"
#include "tests/testing/test_files.h"

namespace {

using namespace std::chrono_literals;

void all_reduces(distcomm::ProcessGroup& pg, int n) {
  for (int i = 0; i < n; ++i) {
    distcomm::Tensor t = distcomm::Tensor::zeros({4});
    pg.all_reduce(t)->wait();
  }
}

// Polls until pred() or the deadline; false at the deadline.
template <typename Pred>
bool eventually(Pred pred, std::chrono::seconds deadline = 60s) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

// Rank 0 serves the store: it leaves last, once every other rank is through with it.
void leave(distcomm::ProcessGroup& pg) {
  if (pg.rank() != 0) {
    pg.store()->add("trace_probe/left", 1);
  } else if (!eventually([&] { return pg.store()->add("trace_probe/left", 0) == pg.size() - 1; })) {
    throw distcomm::Error("rank 0: the other ranks never finished");
  }
}

int skip(distcomm::ProcessGroup& pg) {
  all_reduces(pg, 3);
  const std::string dump = std::string(std::getenv("DISTCOMM_TRACE_DIR")) + "/rank_" + std::to_string(pg.rank()) + ".json";
  if (pg.rank() == 1) {
    // Skips all_reduce #3 for a recv nobody sends; stays until the others have failed.
    distcomm::Tensor never = distcomm::Tensor::zeros({8});
    distcomm::P2POptions tag;
    tag.tag = 42;
    // Longer than the others' 3 s: their all_reduce #3 is the first failure, as the test
    // expects (with the group's 3 s, this recv, issued a moment before, timed out first
    // 1 run in 4).
    tag.timeout = std::chrono::seconds(30);
    distcomm::WorkPtr unmatched = pg.recv(never, 0, tag);
    if (!eventually([&] { return pg.store()->add("trace_probe/failed", 0) == pg.size() - 1; })) {
      throw distcomm::Error("rank 1: the others never reported their Timeout");
    }
    leave(pg);
    std::printf("rank 1: skipped all_reduce #3\n");
    return 0;
  }
  try {
    all_reduces(pg, 1);
    throw distcomm::Error("all_reduce #3 succeeded without rank 1");
  } catch (const distcomm::Timeout&) {
    // Written before wait() threw: no waiting here.
    const std::string text = distcomm::testing::read_file(dump);
    if (text.find("\"reason\":\"Timeout in all_reduce #3\"") == std::string::npos) {
      throw distcomm::Error("no dump on Timeout in " + dump + ": '" + text.substr(0, 200) + "'");
    }
    std::printf("rank %d: timed out in all_reduce #3, dump written\n", pg.rank());
  }
  pg.store()->add("trace_probe/failed", 1);
  leave(pg);
  return 0;
}

int sigusr1(distcomm::ProcessGroup& pg) {
  all_reduces(pg, 6);
  if (pg.rank() == 0) {
    const std::string tmp = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
    const std::string dump = tmp + "/distcomm_trace/rank_0.json";
    ::unlink(dump.c_str());
    ::kill(::getpid(), SIGUSR1);
    if (!eventually([&] { return distcomm::testing::read_file(dump).find("\"reason\":\"SIGUSR1\"") != std::string::npos; })) {
      throw distcomm::Error("no dump in " + dump + " after SIGUSR1");
    }
    std::printf("rank 0: dump after SIGUSR1 in %s\n", dump.c_str());
  }
  all_reduces(pg, 6);
  std::printf("rank %d: 12 all_reduces done\n", pg.rank());
  return 0;
}

int launcher_sigusr1(distcomm::ProcessGroup& pg) {
  all_reduces(pg, 3);
  if (pg.rank() == 0) {
    const char* trace_dir = std::getenv("DISTCOMM_TRACE_DIR");
    const char* tmp = std::getenv("TMPDIR");
    const std::string dir = trace_dir && *trace_dir ? trace_dir : std::string(tmp && *tmp ? tmp : "/tmp") + "/distcomm_trace";
    for (int r = 0; r < pg.size(); ++r) ::unlink((dir + "/rank_" + std::to_string(r) + ".json").c_str());
    ::kill(::getppid(), SIGUSR1);  // the launcher
    for (int r = 0; r < pg.size(); ++r) {
      const std::string dump = dir + "/rank_" + std::to_string(r) + ".json";
      if (!eventually([&] { return distcomm::testing::read_file(dump).find("\"reason\":\"SIGUSR1\"") != std::string::npos; },
                      20s)) {
        throw distcomm::Error("no dump in " + dump + " after SIGUSR1 to the launcher");
      }
    }
    std::printf("rank 0: every rank dumped after SIGUSR1 to the launcher\n");
  }
  all_reduces(pg, 4);
  std::printf("rank %d: 7 all_reduces done\n", pg.rank());
  std::fflush(stdout);
  leave(pg);
  return 0;
}

int die(distcomm::ProcessGroup& pg) {
  all_reduces(pg, 3);
  std::fflush(stdout);
  // The last rank dies only once every rank has finished all_reduce #2: a rank killed while
  // a peer still reads its last bytes may reset the connection and fail that peer's op.
  pg.store()->add("trace_probe/finished", 1);
  if (pg.rank() == pg.size() - 1) {
    if (!eventually([&] { return pg.store()->add("trace_probe/finished", 0) == pg.size(); })) {
      throw distcomm::Error("the other ranks never finished all_reduce #2");
    }
    ::raise(SIGKILL);
  }
  std::this_thread::sleep_for(120s);  // "computing": the launcher stops it long before
  return 0;
}

// A hang, as a user stops it: every rank is inside an op that will not end.
int hang(distcomm::ProcessGroup& pg, int stop_signal) {
  all_reduces(pg, 3);
  distcomm::Tensor t = distcomm::Tensor::zeros({4});
  distcomm::WorkPtr stuck;
  if (pg.rank() == 1) {
    distcomm::P2POptions tag;
    tag.tag = 42;
    stuck = pg.recv(t, 0, tag);
  } else {
    stuck = pg.all_reduce(t);
  }
  pg.store()->add("trace_probe/stuck", 1);
  if (pg.rank() == 2) {
    if (!eventually([&] { return pg.store()->add("trace_probe/stuck", 0) == pg.size(); })) {
      throw distcomm::Error("the other ranks never got stuck");
    }
    std::this_thread::sleep_for(300ms);  // their ops have started
    ::kill(::getppid(), stop_signal);    // the launcher, which stops every rank
  }
  stuck->wait();
  throw distcomm::Error("an op that could not end has ended");
}

}  // namespace

int main(int argc, char** argv) {
  return distcomm::run_main("trace_probe", [&] {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "early") {
      const char* rank = std::getenv("RANK");
      if (rank && std::string(rank) == "0") {
        std::fprintf(stderr, "rank 0: failing before its first group\n");
        std::exit(3);
      }
      std::this_thread::sleep_for(60s);  // "loading": the launcher stops it long before
    }
    distcomm::InitOptions o;
    o.backend = "gloo";
    if (mode == "skip") o.timeout = 3s;
    if (mode == "launcher_sigusr1") o.timeout = 40s;  // ranks orphaned by a launcher that died end
    distcomm::ProcessGroupPtr pg = distcomm::init_process_group(o);
    if (mode == "skip") return skip(*pg);
    if (mode == "sigusr1") return sigusr1(*pg);
    if (mode == "die") return die(*pg);
    if (mode == "launcher_sigusr1") return launcher_sigusr1(*pg);
    if (mode == "hang") return hang(*pg, argc > 2 && std::string(argv[2]) == "sigint" ? SIGINT : SIGTERM);
    if (mode == "ok") {
      all_reduces(*pg, 3);
      return 0;
    }
    throw distcomm::InvalidArgument("trace_probe: mode must be skip, sigusr1, launcher_sigusr1, die, hang, early or ok, got '" + mode + "'");
  });
}
