// What each process of an ft_bench run tells the bench: one line per event, appended to
// <dir>/<member>.log with one write() each (so a SIGKILL right after loses nothing):
//
//   commit <step> <wall ns>          the step committed here (after the update)
//   sum <step> <checksum>            the parameters' checksum (Training::checksum) right after
//                                    that commit's update: every member of the step writes the same
//   abort <step> <wall ns> <why>     the step was aborted; the time is when this process learned it
//   kill <step> <wall ns> [<when>]   a victim, just before it SIGKILLs itself: during the step's
//                                    backward, or "in recovery..." (after the step's abort)
//   joined <step> <wall ns>          a replacement took part from this step
//   state <step> <checksum>          its parameters as ft::Manager::begin_step gave them (the
//                                    members' state, broadcast): the members' "sum <step - 1>"
//   end <committed steps> <checksum> the parameters' checksum at the end
//
// Files, not the store: the restart path's store dies with each attempt.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace distcomm {
namespace ft_bench {

int64_t wall_ns(std::chrono::system_clock::time_point t = std::chrono::system_clock::now());

class EventLog {
 public:
  EventLog(const std::string& dir, const std::string& member);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;
  void write(const std::string& line);  // one line, one write()

 private:
  int fd_ = -1;
};

struct Event {
  std::string kind;
  int64_t step = 0;
  int64_t ns = 0;     // commit, abort, kill, joined
  std::string text;   // abort: why; kill: when, if not in a step; sum, state, end: checksum
};

// Every process's events, by member id ("rank0", "rank2+1"), in the order written.
std::map<std::string, std::vector<Event>> read_event_logs(const std::string& dir);

}  // namespace ft_bench
}  // namespace distcomm
