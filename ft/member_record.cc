#include "ft/member_record.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "api/group/auto_backend.h"

namespace distcomm {
namespace ft {
namespace {

constexpr char kSeparator = '\x1f';  // ids, domains and signatures are free text

struct ProcStat {
  bool exists = false;
  char state = '?';
  unsigned long long start_ticks = 0;
};

// /proc/<pid>/stat: "pid (comm) state ppid ... starttime(22) ...". comm may hold spaces and
// parentheses, so fields are counted from the last ')'.
ProcStat read_proc_stat(pid_t pid) {
  ProcStat out;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return out;
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

}  // namespace

std::string MemberRecord::encode() const {
  std::string s;
  for (const std::string& part :
       {id, domain, std::to_string(pid), std::to_string(start_ticks), signature}) {
    s += part;
    s += kSeparator;
  }
  return s;
}

MemberRecord MemberRecord::decode(const std::string& text) {
  std::vector<std::string> parts;
  std::string part;
  for (char c : text) {
    if (c == kSeparator) {
      parts.push_back(part);
      part.clear();
    } else {
      part += c;
    }
  }
  if (parts.size() != 5 || !part.empty()) throw std::invalid_argument("not a member record: '" + text + "'");
  MemberRecord r;
  r.id = parts[0];
  r.domain = parts[1];
  r.pid = static_cast<pid_t>(std::stol(parts[2]));
  r.start_ticks = std::stoull(parts[3]);
  r.signature = parts[4];
  return r;
}

MemberRecord MemberRecord::of_this_process(const std::string& id, const std::string& signature) {
  MemberRecord r;
  r.id = id;
  r.domain = shared_memory_domain();
  r.pid = ::getpid();
  r.start_ticks = read_proc_stat(r.pid).start_ticks;
  r.signature = signature;
  return r;
}

std::string process_gone(const MemberRecord& record) {
  if (record.domain != shared_memory_domain() || record.pid <= 0) return "";
  const ProcStat stat = read_proc_stat(record.pid);
  const std::string who = "its process (pid " + std::to_string(record.pid) + ")";
  if (!stat.exists || stat.start_ticks != record.start_ticks) return who + " has exited";
  if (stat.state == 'Z' || stat.state == 'X') return who + " has exited (not yet reaped)";
  return "";
}

}  // namespace ft
}  // namespace distcomm
