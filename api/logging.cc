#include "api/logging.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "api/errors.h"
#include "api/process_group.h"
#include "api/process/write_fully.h"

namespace distcomm {
namespace {

std::atomic<int> g_rank{-1};
std::atomic<int> g_world{-1};

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

std::string rank_prefix(int rank, int size) {
  return "[rank " + std::to_string(rank) + "/" + std::to_string(size) + "] ";
}

std::string log_prefix() {
  if (g_rank < 0) return "";
  return rank_prefix(g_rank.load(), g_world.load());
}

void log_line(const std::string& text) { write_fully(STDERR_FILENO, prefixed(log_prefix(), text)); }

void log_line_as(int rank, int size, const std::string& text) {
  write_fully(STDERR_FILENO, prefixed(rank_prefix(rank, size), text));
}

void log_rank_zero(const std::string& text) {
  if (g_rank <= 0) log_line(text);
}

namespace {

// ordered_print's work; `purpose` tells its host exchange from another caller's, so that a
// rank's ordered_print never prints another rank's DDP log line (host_exchange.h).
void print_in_rank_order(ProcessGroup& pg, const std::string& purpose, const std::string& text, bool prefix,
                         bool to_stderr) {
  const std::string mine = prefixed(prefix ? rank_prefix(pg.rank(), pg.size()) : "", text);
  const std::vector<std::string> texts = pg.exchange().gather(mine, 0, purpose);
  if (pg.rank() != 0) return;
  std::string all;
  for (const std::string& text_of_rank : texts) all += text_of_rank;
  std::fflush(to_stderr ? stderr : stdout);  // what the program printed before comes first
  write_fully(to_stderr ? STDERR_FILENO : STDOUT_FILENO, all);
}

}  // namespace

void ordered_print(ProcessGroup& pg, const std::string& text, bool prefix, bool to_stderr) {
  print_in_rank_order(pg, "ordered_print", text, prefix, to_stderr);
}

void log_with_mode(LogMode mode, ProcessGroup* pg, const std::string& text) {
  switch (mode) {
    case LogMode::kEveryRank: return log_line(text);
    case LogMode::kRankZero: return log_rank_zero(text);
    case LogMode::kOrdered:
      if (!pg) throw InvalidArgument("log_with_mode: ordered logging needs a process group");
      return print_in_rank_order(*pg, "an ordered log line (log_with_mode: DDP's, ...)", text, /*prefix=*/true,
                                 /*to_stderr=*/false);
  }
}

}  // namespace distcomm
