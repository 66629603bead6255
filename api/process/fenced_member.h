// A member of a fault-tolerant job (ft/) that its group took for gone is fenced: it never
// comes back. The member that declares it gone (ft/liveness.h: a dead mark, by its heartbeat
// or its process) also writes, once, the key kFencedKeyPrefix + its id in the job's store,
// whose value names the process behind it. The launcher that serves the job's store
// (launch/job_store.h) learns of that key as it is created, and kills that process if it is
// one of its own ranks, still running: a stopped (SIGSTOP) or stalled process would
// otherwise keep the launcher waiting after the others have ended, and could come back.
// The member itself, should it run again first, finds its dead mark and ends (ft/manager.h).
//
// Header-only: the launcher, which does not link the core, reads what ft/ writes.
#pragma once

#include <sys/types.h>

#include <fstream>
#include <exception>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace distcomm {
namespace local {

// The namespace of ft/'s keys in the job's store (ft::keys::kRoot), and the fenced members'
// keys in it: "ft/fenced/<member id>" as the store's server holds them.
inline constexpr char kFtStoreRoot[] = "ft";
inline constexpr char kFencedFolder[] = "fenced/";
inline std::string fenced_key_prefix() { return std::string(kFtStoreRoot) + "/" + kFencedFolder; }

// What /proc/<pid>/stat says of a process on this host (in this PID namespace).
struct ProcessStat {
  bool exists = false;
  char state = '?';                  // 'R', 'S', 'T' (stopped), 'Z' (zombie), ...
  unsigned long long start_ticks = 0;  // field 22: clock ticks since boot; with the pid, one process
};

// A /proc/<pid>/stat line: "pid (comm) state ppid ... starttime(22) ...". comm may hold
// spaces and parentheses, so fields are counted from the last ')'.
inline ProcessStat parse_process_stat(const std::string& line) {
  ProcessStat out;
  const auto close = line.rfind(')');
  if (close == std::string::npos) return out;
  std::istringstream fields(line.substr(close + 1));
  std::string field;
  std::vector<std::string> rest;
  while (fields >> field) rest.push_back(field);
  // rest[0] is field 3 (state); field 22 is rest[19].
  if (rest.size() < 20) return out;
  out.exists = true;
  out.state = rest[0].empty() ? '?' : rest[0][0];
  out.start_ticks = std::stoull(rest[19]);
  return out;
}

inline ProcessStat read_process_stat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return {};
  return parse_process_stat(line);
}

// Records of free text (ids, domains, causes) as fields each ended by '\x1f', which none
// holds: a fenced member's here, ft::MemberRecord's (ft/member_record.h).
inline constexpr char kFieldEnd = '\x1f';
inline std::string join_fields(const std::vector<std::string>& fields) {
  std::string s;
  for (const std::string& f : fields) s += f + kFieldEnd;
  return s;
}
// nullopt when text does not end with a field's end.
inline std::optional<std::vector<std::string>> split_fields(const std::string& text) {
  std::vector<std::string> fields;
  std::string field;
  for (char c : text) {
    if (c == kFieldEnd) {
      fields.push_back(field);
      field.clear();
    } else {
      field += c;
    }
  }
  if (!field.empty()) return std::nullopt;
  return fields;
}

// The value of a fenced member's key.
struct FencedMember {
  std::string id;      // its member id
  std::string domain;  // its process's host and PID namespace (shared_memory_domain())
  pid_t pid = 0;
  unsigned long long start_ticks = 0;  // its process's (ProcessStat): a reused pid is not it
  std::string why;     // the first cause its group wrote ("its heartbeat has not moved for ...")

  std::string encode() const {
    return join_fields({id, domain, std::to_string(pid), std::to_string(start_ticks), why});
  }
  // nullopt for text encode() did not make.
  static std::optional<FencedMember> decode(const std::string& text) {
    const std::optional<std::vector<std::string>> parts = split_fields(text);
    if (!parts || parts->size() != 5) return std::nullopt;
    FencedMember m;
    m.id = (*parts)[0];
    m.domain = (*parts)[1];
    m.why = (*parts)[4];
    try {
      m.pid = static_cast<pid_t>(std::stol((*parts)[2]));
      m.start_ticks = std::stoull((*parts)[3]);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    return m;
  }

  // Whether `pid`, a child of the caller that it has not reaped, is this member's process
  // and still runs (not a zombie): the only case in which its launcher kills it.
  bool is_running_process(pid_t child) const {
    if (child != pid) return false;
    const ProcessStat stat = read_process_stat(child);
    return stat.exists && stat.start_ticks == start_ticks && stat.state != 'Z' && stat.state != 'X';
  }
};

}  // namespace local
}  // namespace distcomm
