// What every rank of a job does in the tests of a store that outlives rank 0 (a launcher
// serves it: tools/launch, spawn()): store_survivor_probe's ranks under tools/launch, and
// the ranks of a spawn() in store_jobs_test.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "api/errors.h"
#include "api/process_group.h"
#include "api/store/store.h"

namespace distcomm {
namespace testing {

enum class RankZeroLeaves {
  kKilled,  // SIGKILL: no farewell, no goodbye
  kExits,   // it returns (its program ends cleanly)
};

// Every rank posts its pid on pg's store and waits for all of them; then rank 0 leaves as
// `how` says (returning "rank 0 left" for kExits), and the others, once its process has
// ended, use the store together -- set, add, wait, get -- and return "survived <rank>".
// Served by rank 0, the store is gone by then, and a survivor throws. Any other trouble
// throws Error.
inline std::string outlive_rank_zero(ProcessGroup& pg, RankZeroLeaves how) {
  using namespace std::chrono_literals;
  Store& store = *pg.store();
  const int rank = pg.rank();
  auto key = [](const std::string& what, int r) { return "survivors/" + what + "/" + std::to_string(r); };
  auto keys = [&](const std::string& what, int from) {
    std::vector<std::string> all;
    for (int r = from; r < pg.size(); ++r) all.push_back(key(what, r));
    return all;
  };
  store.set(key("pid", rank), std::to_string(::getpid()));
  store.wait(keys("pid", 0), 30s);  // nobody is missing when rank 0 leaves
  if (rank == 0) {
    if (how == RankZeroLeaves::kExits) return "rank 0 left";
    ::kill(::getpid(), SIGKILL);
    for (;;) ::pause();
  }
  // Until rank 0's process has ended (a zombie has: its sockets are closed).
  const std::string stat_path = "/proc/" + store.get_string(key("pid", 0)) + "/stat";
  for (const auto give_up = std::chrono::steady_clock::now() + 30s;;) {
    std::ifstream stat(stat_path);
    std::string pid, name, state;
    if (!(stat >> pid >> name >> state) || state == "Z" || state == "X") break;
    if (std::chrono::steady_clock::now() > give_up) throw Error("rank 0 (pid " + pid + ") is still alive after 30 s");
    std::this_thread::sleep_for(5ms);
  }
  // Only now, with rank 0 gone: every survivor counts itself in, says it is alive, and
  // reads what each of the others said and the count.
  store.add("survivors/count", 1);
  store.set(key("alive", rank), "rank " + std::to_string(rank) + " is alive");
  store.wait(keys("alive", 1), 30s);
  for (int r = 1; r < pg.size(); ++r) {
    const std::string said = store.get_string(key("alive", r));
    if (said != "rank " + std::to_string(r) + " is alive") throw Error("rank " + std::to_string(r) + " said '" + said + "'");
  }
  const int64_t count = store.add("survivors/count", 0);
  if (count != pg.size() - 1) throw Error("the survivors counted " + std::to_string(count));
  return "survived " + std::to_string(rank);
}

}  // namespace testing
}  // namespace distcomm
