// A rank the OOM killer ended is said to be (oom_kills.h, ChildSet): an outside user's ranks
// in a 160 MiB memory cgroup read only "signal SIGKILL (Killed)". The cgroup files' formats
// (v1 and v2) are read from texts; a real child in a real memory cgroup allocates past its
// limit where this process may make one (root, a writable cgroup file system).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "api/process/local_processes.h"
#include "api/process/local_ranks.h"
#include "api/process/oom_kills.h"

namespace distcomm {
namespace local {
namespace {

constexpr char kHint[] = "likely the OOM killer";

bool write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

TEST(OomKillHint, ReadsTheMemoryCgroupOfBothVersions) {
  const std::string v1 = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/72b5\n3:cpuset:/\n0::/\n";
  ASSERT_TRUE(memory_cgroup_of(v1));
  EXPECT_EQ(memory_cgroup_of(v1)->path, "/process_api/72b5");
  EXPECT_TRUE(memory_cgroup_of(v1)->v1);
  ASSERT_TRUE(memory_cgroup_of("5:cpu,memory,blkio:/job/7\n"));
  EXPECT_EQ(memory_cgroup_of("5:cpu,memory,blkio:/job/7\n")->path, "/job/7");
  const std::string v2 = "0::/user.slice/job 7\n";
  ASSERT_TRUE(memory_cgroup_of(v2));
  EXPECT_EQ(memory_cgroup_of(v2)->path, "/user.slice/job 7");
  EXPECT_FALSE(memory_cgroup_of(v2)->v1);
  EXPECT_FALSE(memory_cgroup_of("8:pids:/\n"));
  EXPECT_FALSE(memory_cgroup_of(""));
}

TEST(OomKillHint, ReadsTheOomKillCountOfBothFiles) {
  EXPECT_EQ(oom_kill_count("oom_kill_disable 0\nunder_oom 0\noom_kill 4\n"), 4u);  // v1 memory.oom_control
  EXPECT_EQ(oom_kill_count("low 0\nhigh 0\nmax 120\noom 3\noom_kill 2\noom_group_kill 1\n"), 2u);  // v2 memory.events
  EXPECT_FALSE(oom_kill_count("oom_kill_disable 0\nunder_oom 0\n"));  // before Linux 4.13
  EXPECT_EQ(memory_limit_bytes("167772160\n"), 167772160u);
  EXPECT_FALSE(memory_limit_bytes("max\n"));
  EXPECT_FALSE(memory_limit_bytes("9223372036854771712\n"));  // v1's "no limit"
}

// The count read at the start against the one at death, in a folder that stands for a v1 cgroup.
TEST(OomKillHint, SaysSoOnlyWhenTheCountRose) {
  char tmpl[] = "/tmp/oom_kill_hint_XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  ASSERT_TRUE(write_text(dir + "/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"));
  ASSERT_TRUE(write_text(dir + "/memory.limit_in_bytes", "167772160\n"));
  const OomCount start{"/job/7", dir, /*v1=*/true, 2};
  EXPECT_EQ(oom_kill_hint(start), "");
  ASSERT_TRUE(write_text(dir + "/memory.oom_control", "oom_kill_disable 0\nunder_oom 1\noom_kill 3\n"));
  EXPECT_EQ(oom_kill_hint(start),
            "likely the OOM killer: memory cgroup /job/7 counts 1 more OOM kill, limit 160 MiB; give the job more memory");
  std::system(("rm -rf '" + dir + "'").c_str());
}

// A memory cgroup of its own under this process's, limited to `limit` bytes with no swap.
struct LimitedCgroup {
  explicit LimitedCgroup(uint64_t limit) {
    std::ifstream in("/proc/self/cgroup");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::optional<MemoryCgroup> own = memory_cgroup_of(text);
    if (!own) {
      why_not = "no memory cgroup in /proc/self/cgroup";
      return;
    }
    v1 = own->v1;
    name = (own->path == "/" ? "" : own->path) + "/oom_kill_hint_test." + std::to_string(::getpid());
    dir = std::string(kCgroupRoot) + (v1 ? "/memory" : "") + name;
    if (::mkdir(dir.c_str(), 0755) != 0) {
      why_not = "cannot make the memory cgroup " + dir + ": " + std::strerror(errno);
      dir.clear();
      return;
    }
    const bool limited = v1 ? write_text(dir + "/memory.limit_in_bytes", std::to_string(limit))
                            : write_text(dir + "/memory.max", std::to_string(limit));
    if (v1) {
      write_text(dir + "/memory.memsw.limit_in_bytes", std::to_string(limit));  // absent without swap accounting
    } else {
      write_text(dir + "/memory.swap.max", "0");
    }
    if (!limited) why_not = "cannot limit the memory of " + dir;
  }
  ~LimitedCgroup() {
    if (!dir.empty()) ::rmdir(dir.c_str());
  }
  bool move(pid_t pid) const { return write_text(dir + "/cgroup.procs", std::to_string(pid)); }

  bool v1 = false;
  std::string name;  // as /proc/<pid>/cgroup names it
  std::string dir;
  std::string why_not;  // "" when it is there, limited
};

// A child in the cgroup, watched from there (as a launcher in a job's cgroup watches its
// ranks), that allocates past the limit once told to. Returns the ended child.
Child run_hog(const LimitedCgroup& cgroup, bool* moved) {
  int go[2];
  EXPECT_EQ(::pipe2(go, O_CLOEXEC), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    char c;
    if (::read(go[0], &c, 1) != 1) ::_exit(2);
    constexpr size_t kStep = 1 << 20;
    for (int i = 0; i < 1024; ++i) {  // 1 GiB, each page touched
      char* p = static_cast<char*>(std::malloc(kStep));
      if (p == nullptr) ::_exit(3);
      std::memset(p, i, kStep);
    }
    ::_exit(0);
  }
  ::close(go[0]);
  *moved = cgroup.move(pid);
  ChildSet set;
  set.add(watched_child(pid));
  if (*moved) {
    EXPECT_EQ(::write(go[1], "g", 1), 1);
  }
  ::close(go[1]);  // unmoved, it exits at once
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (set.running() > 0 && std::chrono::steady_clock::now() < deadline) set.poll(std::chrono::milliseconds(200));
  if (set.running() > 0) {
    ADD_FAILURE() << "the child did not end within 60 s";
    set.kill_all();
  }
  return set[0];
}

TEST(OomKillHint, AChildTheOomKillerEndedIsSaidToBe) {
  if (::geteuid() != 0) GTEST_SKIP() << "making a memory cgroup needs root";
  const LimitedCgroup cgroup(64u << 20);
  if (!cgroup.why_not.empty()) GTEST_SKIP() << cgroup.why_not;
  bool moved = false;
  const Child c = run_hog(cgroup, &moved);
  if (!moved) GTEST_SKIP() << "cannot move a process into " << cgroup.dir;
  ASSERT_TRUE(WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGKILL) << describe_wait_status(c.status);
  EXPECT_EQ(how_it_failed(c), "signal SIGKILL (Killed) (likely the OOM killer: memory cgroup " + cgroup.name +
                                  " counts 1 more OOM kill, limit 64 MiB; give the job more memory)");
}

// A SIGKILL the set sent itself is its own, whatever the cgroup counted.
TEST(OomKillHint, NoHintForTheSetsOwnSigkillOrAnotherSignal) {
  ChildSet set;
  set.add(fork_child([] {
    ::pause();
    return std::string();
  }));
  set.signal(SIGKILL);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (set.running() > 0 && std::chrono::steady_clock::now() < deadline) set.poll(std::chrono::milliseconds(200));
  ASSERT_EQ(set.running(), 0);
  EXPECT_TRUE(set[0].sigkill_sent);
  EXPECT_EQ(describe_end(set[0]).find(kHint), std::string::npos) << describe_end(set[0]);
  EXPECT_EQ(describe_end(set[0]), "signal SIGKILL (Killed)");
}

}  // namespace
}  // namespace local
}  // namespace distcomm
