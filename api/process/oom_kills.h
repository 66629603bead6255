// Whether the kernel's OOM killer is the likely sender of a rank's SIGKILL: the OOM kills its
// memory cgroup counts, read when the rank starts and again when it dies. The kernel says
// nothing to the parent of a process it kills for memory; without this, an OOM kill read
// only "signal SIGKILL (Killed)" (an outside user's probe, a rank in a 160 MiB cgroup).
//
//   cgroup v2: <root>/<path>/memory.events      "oom_kill N" line; the limit in memory.max
//   cgroup v1: <root>/memory/<path>/memory.oom_control  "oom_kill N"; memory.limit_in_bytes
// where /proc/<pid>/cgroup names <path> ("0::<path>" for v2, "N:...memory...:<path>" for v1).
//
// Header-only, as local_processes.h (the launcher does not link the core).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace distcomm {
namespace local {

constexpr char kCgroupRoot[] = "/sys/fs/cgroup";

// A memory cgroup as /proc/<pid>/cgroup names it.
struct MemoryCgroup {
  std::string path;  // "/job/7", as the kernel names it
  bool v1 = false;   // the v1 memory controller's hierarchy, else the v2 (unified) one
};

// The memory cgroup in a /proc/<pid>/cgroup text: the v1 memory controller's line when there
// is one (a v1 system with its unified hierarchy mounted as well lists "0::" too, without
// memory accounting), else the v2 line.
inline std::optional<MemoryCgroup> memory_cgroup_of(const std::string& proc_cgroup_text) {
  std::istringstream in(proc_cgroup_text);
  std::optional<MemoryCgroup> v2;
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {
      v2 = MemoryCgroup{path, false};
      continue;
    }
    std::istringstream names(controllers);
    for (std::string name; std::getline(names, name, ',');) {
      if (name == "memory") return MemoryCgroup{path, true};
    }
  }
  return v2;
}

// The value of the "oom_kill N" line of memory.events (v2) or memory.oom_control (v1).
inline std::optional<uint64_t> oom_kill_count(const std::string& text) {
  std::istringstream in(text);
  for (std::string key, value; in >> key >> value;) {
    if (key != "oom_kill") continue;
    try {
      return std::stoull(value);
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

// A memory limit file's bytes: memory.max ("max": none) or memory.limit_in_bytes (v1 says
// no limit with a number near 2^63).
inline std::optional<uint64_t> memory_limit_bytes(const std::string& text) {
  try {
    const uint64_t bytes = std::stoull(text);
    return bytes >= (uint64_t{1} << 60) ? std::nullopt : std::optional<uint64_t>(bytes);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

inline std::optional<std::string> read_small_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A process's memory cgroup and the OOM kills it had counted when read.
struct OomCount {
  std::string cgroup;  // its path, as /proc/<pid>/cgroup names it
  std::string dir;     // its folder under the cgroup file system
  bool v1 = false;
  uint64_t kills = 0;
};

// The OOM kills counted in the cgroup folder `dir`, if it has the file.
inline std::optional<uint64_t> oom_kills_in(const std::string& dir, bool v1) {
  const std::optional<std::string> text = read_small_file(dir + (v1 ? "/memory.oom_control" : "/memory.events"));
  return text ? oom_kill_count(*text) : std::nullopt;
}

// The memory cgroup of the live process `pid` and its OOM kills so far; nothing when either
// cannot be read (no memory controller, /proc or /sys/fs/cgroup not mounted). A container
// that mounts its own cgroup as the root of the hierarchy names a path not under it: its
// root folder then stands for the cgroup.
inline std::optional<OomCount> oom_count_of(pid_t pid, const std::string& root = kCgroupRoot) {
  const std::optional<std::string> text = read_small_file("/proc/" + std::to_string(pid) + "/cgroup");
  const std::optional<MemoryCgroup> cgroup = text ? memory_cgroup_of(*text) : std::nullopt;
  if (!cgroup) return std::nullopt;
  const std::string hierarchy = root + (cgroup->v1 ? "/memory" : "");
  for (const std::string& dir : {hierarchy + (cgroup->path == "/" ? "" : cgroup->path), hierarchy}) {
    if (const std::optional<uint64_t> kills = oom_kills_in(dir, cgroup->v1)) {
      return OomCount{cgroup->path, dir, cgroup->v1, *kills};
    }
  }
  return std::nullopt;
}

// What a rank's SIGKILL, sent by nobody the caller knows of, most likely was, when its memory
// cgroup counted more OOM kills at its death than at `start` (oom_count_of when it started):
// "likely the OOM killer: memory cgroup /job counts 1 more OOM kill, limit 160 MiB; give the
// job more memory". "" when the count did not rise or cannot be read.
inline std::string oom_kill_hint(const OomCount& start) {
  const std::optional<uint64_t> now = oom_kills_in(start.dir, start.v1);
  if (!now || *now <= start.kills) return "";
  const uint64_t more = *now - start.kills;
  std::string limit;
  const std::optional<std::string> limit_text =
      read_small_file(start.dir + (start.v1 ? "/memory.limit_in_bytes" : "/memory.max"));
  if (const std::optional<uint64_t> bytes = limit_text ? memory_limit_bytes(*limit_text) : std::nullopt) {
    limit = ", limit " + std::to_string(*bytes >> 20) + " MiB";
  }
  return "likely the OOM killer: memory cgroup " + start.cgroup + " counts " + std::to_string(more) + " more OOM kill" +
         (more == 1 ? "" : "s") + limit + "; give the job more memory";
}

}  // namespace local
}  // namespace distcomm
