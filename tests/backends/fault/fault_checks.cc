#include "tests/backends/fault/fault_checks.h"

#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "api/diagnostics/op_fingerprint.h"  // rank_list_text

namespace distcomm {
namespace fault {

Tensor floats(int64_t n) { return Tensor::zeros({n}); }

std::vector<int> ranks_but(int size, int skip) {
  std::vector<int> ranks;
  for (int r = 0; r < size; ++r) {
    if (r != skip) ranks.push_back(r);
  }
  return ranks;
}

// The library's own formatter: expected messages spell lists as the messages do, ranges
// included, at any group size.
std::string rank_list(const std::vector<int>& ranks) { return rank_list_text(ranks); }

void expect_departure_named(const std::string& message, int culprit, const std::vector<std::string>& words,
                            const std::string& what) {
  std::string alternatives;
  for (const std::string& w : words) alternatives += (alternatives.empty() ? "" : "|") + w;
  // "rank 1 (pid 17) died", "rank 1 closed its connection", "rank 0 shut the group down":
  // the rank, then the word before the clause ends.
  const std::regex named("rank " + std::to_string(culprit) + "([^0-9/][^.;:]*)?\\b(" + alternatives + ")\\b");
  EXPECT_TRUE(std::regex_search(message, named))
      << what << ": should name rank " << culprit << " with one of [" << alternatives << "]: " << message;
  // Nor may it call a survivor the first to fail (hier once said "rank 1 of the group failed
  // first: ... rank 0 closed its connection", sending readers to a healthy rank).
  static const std::regex first(R"(rank (\d+)(?: \(world rank \d+\))? of the group failed first)");
  for (std::sregex_iterator it(message.begin(), message.end(), first), end; it != end; ++it) {
    EXPECT_EQ(std::stoi((*it)[1]), culprit) << what << ": calls rank " << (*it)[1] << " the first to fail: " << message;
  }
}

void expect_table_line(const std::string& message, const std::string& who, const std::string& op,
                       const std::string& what) {
  std::istringstream lines(message);
  for (std::string line; std::getline(lines, line);) {
    const size_t start = line.find_first_not_of(' ');
    if (start == std::string::npos || line.compare(start, who.size(), who) != 0) continue;
    EXPECT_NE(line.find(op), std::string::npos) << what << ": the table's '" << who << "' line should hold '" << op
                                                << "': " << message;
    return;
  }
  ADD_FAILURE() << what << ": no line of the Desync's table starts with '" << who << "': " << message;
}

void expect_has(const std::string& message, const std::string& text, const std::string& what) {
  EXPECT_NE(message.find(text), std::string::npos) << what << ": should say '" << text << "': " << message;
}

void note_time(Store& board, const std::string& key) {
  board.set(key, std::to_string(Clock::now().time_since_epoch().count()));
}

Clock::time_point noted_time(Store& board, const std::string& key) {
  board.wait({key}, std::chrono::milliseconds(60000));
  return Clock::time_point(Clock::duration(std::stoll(board.get_string(key))));
}

void expect_stopped_rank_alone_silent(const std::string& message, int stopped, const std::string& pid,
                                      const std::string& who) {
  if (!pid.empty()) {
    const std::regex state("rank " + std::to_string(stopped) + ",? (which )?did not report: its process " + pid +
                           " on this host is stopped \\(SIGSTOP");
    EXPECT_TRUE(std::regex_search(message, state))
        << who << ": rank " << stopped << "'s process (" << pid << ") as stopped: " << message;
  }
  static const std::regex silent(R"(rank (\d+),? (?:which )?did not report)");
  for (std::sregex_iterator it(message.begin(), message.end(), silent), end; it != end; ++it) {
    EXPECT_EQ(std::stoi((*it)[1]), stopped) << who << " names rank " << (*it)[1] << " as not reporting: " << message;
  }
}

}  // namespace fault
}  // namespace distcomm
