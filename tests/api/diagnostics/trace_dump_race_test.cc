// Dumps of one process written at the same time (a failure's in the op's thread, SIGUSR1's
// in the dump thread, the exit's): each lands whole, the file is one dump, and no temp
// file is left. Before, they shared one temp name (rank_<R>.json.tmp<pid>): a shorter dump
// written over a longer one left the longer one's tail after its end (not JSON), the
// second rename failed ("No such file or directory"), and temp files were left behind.
#include <dirent.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "api/diagnostics/flight_recorder.h"
#include "api/diagnostics/trace_dump.h"
#include "api/group/process_environment.h"
#include "tools/trace/json_value.h"

namespace distcomm {
namespace {

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
  return out;
}

TEST(TraceDumpRace, TwoDumpsAtOnceEachLandWholeAndLeaveNoTempFile) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/race";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  // A recorder with many ops: a dump of some 100 KB takes several writes, time for another
  // dump to come in between.
  auto recorder = std::make_shared<FlightRecorder>(2000);
  TraceGroupInfo info;
  info.name = "world";
  info.rank = 0;
  info.size = 1;
  info.global_ranks = {97};
  info.backend = "gloo";
  recorder->set_info(info);
  TraceSettings settings;
  settings.dump_dir = dir;
  settings.launcher_rank = 97;
  register_for_dumps(recorder, settings);
  for (uint64_t seq = 0; seq < 1000; ++seq) {
    OpFingerprint f;
    f.op = OpType::kAllReduce;
    f.seq = seq;
    recorder->queued(f);
  }

  // A long reason and a short one: a short dump over a long one is what broke the file.
  const std::string long_reason = "PeerFailure in all_reduce #6 " + std::string(4000, 'x');
  std::atomic<int> failures{0};
  std::string first_failure;
  std::atomic<bool> go{false};
  auto writer = [&](const std::string& reason) {
    while (!go.load()) std::this_thread::yield();
    for (int i = 0; i < 80; ++i) {
      try {
        write_trace_dump(reason);
      } catch (const std::exception& e) {
        if (failures.fetch_add(1) == 0) first_failure = e.what();
      }
    }
  };
  std::thread a(writer, long_reason), b(writer, std::string("exit"));
  go.store(true);
  a.join();
  b.join();
  EXPECT_EQ(failures.load(), 0) << first_failure;

  // The file is one dump, whole: one of the two.
  trace::JsonValue doc;
  ASSERT_NO_THROW(doc = trace::parse_json_file(dir + "/rank_97.json"));
  EXPECT_EQ(doc.str("format"), "distcomm-trace-dump");
  EXPECT_TRUE(doc.str("reason") == "exit" || doc.str("reason") == long_reason) << doc.str("reason").substr(0, 40);
  EXPECT_EQ(doc["groups"].items.size(), 1u);
  // Nothing but the dump in the folder.
  EXPECT_EQ(files_in(dir), std::vector<std::string>{"rank_97.json"});

  // A dump that cannot be written (a folder where the file should go) says so and leaves
  // no temp file either.
  const std::string blocked = dir + "/blocked";
  ASSERT_EQ(::mkdir(blocked.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((blocked + "/rank_97.json").c_str(), 0755), 0);
  settings.dump_dir = blocked;
  register_for_dumps(recorder, settings);
  EXPECT_THROW(write_trace_dump("exit"), std::exception);
  EXPECT_EQ(files_in(blocked), std::vector<std::string>{"rank_97.json"});
  // The exit dump (at the test's end) goes where it can.
  settings.dump_dir = dir;
  register_for_dumps(recorder, settings);
}

}  // namespace
}  // namespace distcomm
