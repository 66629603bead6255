#include "tools/ft_bench/event_log.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "api/process/write_fully.h"

namespace distcomm {
namespace ft_bench {

int64_t wall_ns(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

EventLog::EventLog(const std::string& dir, const std::string& member) {
  const std::string path = dir + "/" + member + ".log";
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("ft_bench: cannot open " + path);
}

EventLog::~EventLog() {
  if (fd_ >= 0) ::close(fd_);
}

void EventLog::write(const std::string& line) { write_fully(fd_, line + "\n"); }

std::map<std::string, std::vector<Event>> read_event_logs(const std::string& dir) {
  std::map<std::string, std::vector<Event>> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) throw std::runtime_error("ft_bench: cannot read " + dir);
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() < 5 || name.compare(name.size() - 4, 4, ".log") != 0) continue;
    std::vector<Event>& events = out[name.substr(0, name.size() - 4)];
    std::ifstream in(dir + "/" + name);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      Event ev;
      fields >> ev.kind >> ev.step;
      if (ev.kind == "end" || ev.kind == "sum" || ev.kind == "state") {
        fields >> ev.text;
      } else {
        fields >> ev.ns;
        std::getline(fields, ev.text);
        if (!ev.text.empty() && ev.text[0] == ' ') ev.text.erase(0, 1);
      }
      events.push_back(ev);
    }
  }
  ::closedir(d);
  return out;
}

}  // namespace ft_bench
}  // namespace distcomm
