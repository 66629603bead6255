// A real cgroup CPU quota for a test: a child of this process's cgroup in the cgroup v1 cpu
// hierarchy (/sys/fs/cgroup/cpu or cpu,cpuacct), with cpu.cfs_quota_us / cpu.cfs_period_us
// set, that processes join. Removed when the object goes, a failed assertion included: the
// processes still in it are moved back to the parent first. Needs root and a writable cgroup
// v1 cpu controller (Bazel's linux-sandbox mounts /sys read-only: tag the test no-sandbox);
// make() says why not otherwise, for GTEST_SKIP. cgroup v2 is not handled: there a child
// with the cpu controller needs its parent's subtree_control changed.
#pragma once

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace distcomm {
namespace testing {

class CpuQuotaCgroup {
 public:
  // A child named <prefix>_<pid> with quota_us of CPU time a period_us; nullptr and
  // *why_not when none can be made here.
  static std::unique_ptr<CpuQuotaCgroup> make(const std::string& prefix, long quota_us, long period_us,
                                              std::string* why_not) {
    if (::geteuid() != 0) {
      *why_not = "not root: cannot make a cgroup";
      return nullptr;
    }
    const std::string parent = own_cpu_folder();
    if (parent.empty()) {
      *why_not = "no writable cgroup v1 cpu controller for this process (/sys/fs/cgroup/cpu or cpu,cpuacct)";
      return nullptr;
    }
    remove_leftovers(parent, prefix);
    std::unique_ptr<CpuQuotaCgroup> made(new CpuQuotaCgroup(parent, parent + "/" + prefix + "_" + std::to_string(::getpid())));
    if (::mkdir(made->folder_.c_str(), 0755) != 0) {
      *why_not = "cannot make " + made->folder_ + ": " + std::strerror(errno);
      made->made_ = false;
      return nullptr;
    }
    if (!write_text(made->folder_ + "/cpu.cfs_period_us", std::to_string(period_us)) ||
        !write_text(made->folder_ + "/cpu.cfs_quota_us", std::to_string(quota_us))) {
      *why_not = "cannot set a quota in " + made->folder_;
      return nullptr;  // removed by its destructor
    }
    return made;
  }

  CpuQuotaCgroup(const CpuQuotaCgroup&) = delete;
  CpuQuotaCgroup& operator=(const CpuQuotaCgroup&) = delete;

  ~CpuQuotaCgroup() {
    if (!made_) return;
    // A child an assertion left running: back to the parent, so that the folder can go.
    for (const std::string& pid : lines(folder_ + "/cgroup.procs")) write_text(parent_ + "/cgroup.procs", pid);
    // An ended process may keep its cgroup busy for a moment.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (::rmdir(folder_.c_str()) != 0 && errno == EBUSY && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  const std::string& folder() const { return folder_; }

  // Moves the calling process (all its threads) into the cgroup.
  bool join() const { return write_text(folder_ + "/cgroup.procs", std::to_string(::getpid())); }

  // A field of cpu.stat (nr_periods, nr_throttled, throttled_time); -1 when unreadable.
  long stat(const std::string& key) const {
    for (const std::string& line : lines(folder_ + "/cpu.stat")) {
      std::istringstream in(line);
      std::string name;
      long value = -1;
      if (in >> name >> value && name == key) return value;
    }
    return -1;
  }

 private:
  CpuQuotaCgroup(std::string parent, std::string folder) : parent_(std::move(parent)), folder_(std::move(folder)) {}

  static bool write_text(const std::string& path, const std::string& text) {
    std::ofstream out(path);
    out << text;
    out.flush();
    return static_cast<bool>(out);
  }

  static std::vector<std::string> lines(const std::string& path) {
    std::vector<std::string> all;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) all.push_back(line);
    return all;
  }

  // This process's cgroup in the v1 cpu hierarchy, where it is writable; "" otherwise.
  static std::string own_cpu_folder() {
    for (const std::string& line : lines("/proc/self/cgroup")) {
      const size_t a = line.find(':');
      const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
      if (b == std::string::npos) continue;
      std::istringstream controllers(line.substr(a + 1, b - a - 1));
      bool cpu = false;
      for (std::string c; std::getline(controllers, c, ',');) cpu = cpu || c == "cpu";
      if (!cpu) continue;
      std::string path = line.substr(b + 1);
      if (path == "/") path.clear();
      for (const char* mount : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
        const std::string folder = mount + path;
        if (::access((folder + "/cpu.cfs_quota_us").c_str(), W_OK) == 0 &&
            ::access((folder + "/cgroup.procs").c_str(), W_OK) == 0) {
          return folder;
        }
      }
    }
    return "";
  }

  // Folders of earlier runs killed before removing theirs (<prefix>_<pid of no process>):
  // rmdir fails anyway on a cgroup that still holds a process.
  static void remove_leftovers(const std::string& parent, const std::string& prefix) {
    DIR* dir = ::opendir(parent.c_str());
    if (dir == nullptr) return;
    const std::string start = prefix + "_";
    while (const dirent* entry = ::readdir(dir)) {
      const std::string name = entry->d_name;
      if (name.compare(0, start.size(), start) != 0) continue;
      const long pid = std::strtol(name.c_str() + start.size(), nullptr, 10);
      if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) ::rmdir((parent + "/" + name).c_str());
    }
    ::closedir(dir);
  }

  std::string parent_;
  std::string folder_;
  bool made_ = true;
};

}  // namespace testing
}  // namespace distcomm
