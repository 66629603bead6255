// What each process of an ft_bench run tells the bench: one line per event, appended to
// <dir>/<member>.log with one write() each (so a SIGKILL right after loses nothing):
//
//   commit <step> <wall ns>          the step committed here (after the update)
//   abort <step> <wall ns> <why>     the step was aborted; the time is when this process learned it
//   kill <step> <wall ns>            the victim, just before it SIGKILLs itself
//   joined <step> <wall ns>          a replacement took part from this step
//   end <committed steps> <checksum> the parameters' FNV-1a 64 at the end, in hex
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
  std::string text;   // abort: why; end: checksum
};

// Every process's events, by member id ("rank0", "rank2+1"), in the order written.
std::map<std::string, std::vector<Event>> read_event_logs(const std::string& dir);

}  // namespace ft_bench
}  // namespace distcomm
