#include "api/logging.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>

#include "api/errors.h"
#include "api/process_group.h"

namespace distcomm {
namespace {

std::atomic<int> g_rank{-1};
std::atomic<int> g_world{-1};

// One write() per line so that lines from ranks sharing a terminal or pipe never interleave
// mid-line (writes up to PIPE_BUF bytes to a pipe are atomic).
void write_all(int fd, const std::string& s) {
  const char* p = s.data();
  size_t left = s.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

// Puts prefix before every line of text; a trailing newline does not make an empty line.
std::string prefixed(const std::string& prefix, const std::string& text) {
  std::string out;
  size_t start = 0;
  do {
    const size_t nl = text.find('\n', start);
    const size_t end = nl == std::string::npos ? text.size() : nl;
    out += prefix + text.substr(start, end - start) + "\n";
    start = end + 1;
  } while (start < text.size());
  return out;
}

}  // namespace

void set_log_identity(int rank, int world_size) {
  g_rank = rank;
  g_world = world_size;
}

std::string log_prefix() {
  if (g_rank < 0) return "";
  return "[rank " + std::to_string(g_rank.load()) + "/" + std::to_string(g_world.load()) + "] ";
}

void log_line(const std::string& text) { write_all(STDERR_FILENO, prefixed(log_prefix(), text)); }

void log_rank_zero(const std::string& text) {
  if (g_rank <= 0) log_line(text);
}

void ordered_print(ProcessGroup& pg, const std::string& text, bool prefix) {
  // Each call gets its own key space. Calls are counted per group: every member of a group
  // makes the same calls on it, but a subgroup's calls are not made by the other ranks.
  static std::mutex mu;
  static std::map<std::string, uint64_t> calls;
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu);
    id = calls[pg.name()]++;
  }
  const std::string base = "ordered_print/" + pg.name() + "/" + std::to_string(id) + "/";
  const std::string mine =
      prefix ? prefixed("[rank " + std::to_string(pg.rank()) + "/" + std::to_string(pg.size()) + "] ", text)
             : prefixed("", text);
  std::string all;
  if (!pg.store_is_shared()) {
    // MPI groups have no shared store: one exchange through the group's collectives.
    for (const auto& text_of_rank : pg.all_gather_strings(mine)) all += text_of_rank;
    if (pg.rank() != 0) return;
  } else if (pg.rank() != 0) {
    pg.store()->set(base + std::to_string(pg.rank()), mine);  // post and go on
    return;
  } else {
    all = mine;
    for (int r = 1; r < pg.size(); ++r) {
      const std::string key = base + std::to_string(r);
      all += pg.store()->get_string(key);
      pg.store()->delete_key(key);
    }
  }
  std::fflush(stdout);  // what the program printed before comes first
  write_all(STDOUT_FILENO, all);
}

void log_with_mode(LogMode mode, ProcessGroup* pg, const std::string& text) {
  switch (mode) {
    case LogMode::kEveryRank: return log_line(text);
    case LogMode::kRankZero: return log_rank_zero(text);
    case LogMode::kOrdered:
      if (!pg) throw InvalidArgument("log_with_mode: ordered logging needs a process group");
      return ordered_print(*pg, text);
  }
}

}  // namespace distcomm
