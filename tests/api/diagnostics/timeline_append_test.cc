// The timeline's appends (timeline.cc): whatever stops one part way -- a full disk, a rank
// killed while it wrote -- the events other ranks appended before stay in the file, and it
// stays one JSON document. An outside user's 12 KiB tmpfs kept only the last rank's events:
// the failed append left broken JSON, which the next rank truncated as "not ours". Each rank
// here is a forked process (the timeline's file is chosen once per process); a full disk
// is RLIMIT_FSIZE, which fails a write part way as ENOSPC does, with no mount.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "api/diagnostics/timeline.h"
#include "api/errors.h"
#include "api/process/local_processes.h"
#include "tools/trace/json_value.h"

namespace distcomm {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/timeline_append_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  std::string path;
};

// Rank `rank` of run "run-a": records `events` instants and flushes them to `file`, its
// stderr going to `file`.rank<R>.err. before_flush runs in the rank first (a file-size
// limit). Returns what the flush threw ("" when it wrote).
std::string run_rank(const std::string& file, int rank, int events, const std::function<void()>& before_flush = {}) {
  local::ChildSet set;
  set.add(local::fork_child([&]() -> std::string {
    const int err = ::open((file + ".rank" + std::to_string(rank) + ".err").c_str(),
                           O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ::dup2(err, 2);
    timeline_configure(file, "run-a");
    for (int i = 0; i < events; ++i) timeline_instant(rank, "lane", "event", timeline_now_ns(), "\"i\":" + std::to_string(i));
    if (before_flush) before_flush();
    try {
      timeline_flush();
    } catch (const Error& e) {
      return std::string(e.what()) + "\n";
    }
    return "";
  }));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (set.running() > 0 && std::chrono::steady_clock::now() < deadline) set.poll(std::chrono::milliseconds(200));
  if (set.running() > 0) {
    set.kill_all();
    ADD_FAILURE() << "rank " << rank << " did not end within 60 s";
  }
  return set[0].report;
}

// How many of rank `rank`'s instants the file holds; fails the test when it is not JSON.
int events_of(const std::string& file, int rank) {
  trace::JsonValue doc;
  try {
    doc = trace::parse_json_file(file);
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what() << "\nthe file:\n" << read_file(file);
    return -1;
  }
  EXPECT_EQ(doc["otherData"].str("run_id"), "run-a");
  int n = 0;
  for (const trace::JsonValue& e : doc["traceEvents"].items) {
    n += e.str("ph") == "i" && e.integer("pid", -1) == rank ? 1 : 0;
  }
  return n;
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  while (dirent* e = d ? ::readdir(d) : nullptr) names.push_back(e->d_name);
  if (d) ::closedir(d);
  return names;
}

TEST(TimelineAppend, AFullDiskPartWayThroughAnAppendKeepsTheEventsBefore) {
  TempDir dir;
  const std::string file = dir.path + "/tl.json";
  ASSERT_EQ(run_rank(file, 0, 50), "");
  ASSERT_EQ(events_of(file, 0), 50);
  const off_t size = static_cast<off_t>(read_file(file).size());
  // Room for a few hundred more bytes, far less than rank 1's events: its write stops part way.
  const std::string refused = run_rank(file, 1, 200, [size] {
    ::signal(SIGXFSZ, SIG_IGN);  // the write fails with EFBIG instead of killing the rank
    const rlimit limit{static_cast<rlim_t>(size + 300), static_cast<rlim_t>(size + 300)};
    ::setrlimit(RLIMIT_FSIZE, &limit);
  });
  EXPECT_NE(refused.find("timeline: cannot write " + file), std::string::npos) << refused;
  EXPECT_NE(refused.find("events of this process are left out, the events before them kept"), std::string::npos)
      << refused;
  EXPECT_EQ(events_of(file, 0), 50) << "rank 1's failed append must leave the file as it was";
  ASSERT_EQ(run_rank(file, 2, 30), "");
  EXPECT_EQ(events_of(file, 0), 50) << "rank 2 must append to the file, not replace it";
  EXPECT_EQ(events_of(file, 1), 0);
  EXPECT_EQ(events_of(file, 2), 30);
}

TEST(TimelineAppend, AnAppendLeftUnfinishedIsCutOffAndTheEventsBeforeKept) {
  TempDir dir;
  const std::string file = dir.path + "/tl.json";
  ASSERT_EQ(run_rank(file, 0, 40), "");
  // A rank SIGKILLed while its events went after the tail: half an event follows it.
  std::ofstream(file, std::ios::binary | std::ios::app) << "{\"ph\":\"i\",\"name\":\"event\",\"pid\":1,\"t";
  ASSERT_EQ(run_rank(file, 2, 10), "");
  EXPECT_EQ(events_of(file, 0), 40);
  EXPECT_EQ(events_of(file, 2), 10);
  const std::string said = read_file(file + ".rank2.err");
  EXPECT_NE(said.find("timeline: " + file + " ended in an unfinished append"), std::string::npos) << said;
  EXPECT_EQ(said.find("timeline: timeline:"), std::string::npos) << said;
}

TEST(TimelineAppend, ADamagedFileIsSetAsideUnderANameTheWarningGives) {
  TempDir dir;
  const std::string file = dir.path + "/tl.json";
  ASSERT_EQ(run_rank(file, 0, 20), "");
  // Cut inside its last event, as a writer of an older version left it: no tail to go back to.
  std::string damaged = read_file(file);
  damaged.resize(damaged.size() - 12);
  write_file(file, damaged);
  ASSERT_EQ(run_rank(file, 1, 5), "");
  EXPECT_EQ(events_of(file, 1), 5);
  std::string aside;
  for (const std::string& name : names_in(dir.path)) {
    if (name.rfind("tl.json.damaged.", 0) == 0) aside = dir.path + "/" + name;
  }
  ASSERT_FALSE(aside.empty()) << "the damaged file must be kept, not truncated";
  EXPECT_EQ(read_file(aside), damaged);
  const std::string said = read_file(file + ".rank1.err");
  EXPECT_NE(said.find("kept as " + aside), std::string::npos) << said;
}

TEST(TimelineAppend, AnotherRunsTimelineIsReplaced) {
  TempDir dir;
  const std::string file = dir.path + "/tl.json";
  write_file(file, "{\"otherData\":{\"run_id\":\"run-b\"},\"traceEvents\":[\n{\"ph\":\"i\",\"pid\":0}\n]}\n");
  ASSERT_EQ(run_rank(file, 0, 3), "");
  EXPECT_EQ(events_of(file, 0), 3);
  for (const std::string& name : names_in(dir.path)) EXPECT_EQ(name.find(".damaged."), std::string::npos) << name;
}

}  // namespace
}  // namespace distcomm
