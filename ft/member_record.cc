#include "ft/member_record.h"

#include <unistd.h>

#include <optional>
#include <stdexcept>
#include <vector>

#include "api/group/auto_backend.h"
#include "api/process/fenced_member.h"

namespace distcomm {
namespace ft {

std::string MemberRecord::encode() const {
  return local::join_fields({id, domain, std::to_string(pid), std::to_string(start_ticks), signature});
}

MemberRecord MemberRecord::decode(const std::string& text) {
  const std::optional<std::vector<std::string>> fields = local::split_fields(text);
  if (!fields || fields->size() != 5) throw std::invalid_argument("not a member record: '" + text + "'");
  const std::vector<std::string>& parts = *fields;
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
  r.start_ticks = local::read_process_stat(r.pid).start_ticks;
  r.signature = signature;
  return r;
}

std::string process_gone(const MemberRecord& record) {
  if (record.domain != shared_memory_domain() || record.pid <= 0) return "";
  const local::ProcessStat stat = local::read_process_stat(record.pid);
  const std::string who = "its process (pid " + std::to_string(record.pid) + ")";
  if (!stat.exists || stat.start_ticks != record.start_ticks) return who + " has exited";
  if (stat.state == 'Z' || stat.state == 'X') return who + " has exited (not yet reaped)";
  return "";
}

}  // namespace ft
}  // namespace distcomm
