#include "api/diagnostics/desync_summary.h"

#include <map>

#include "api/diagnostics/op_fingerprint.h"

namespace distcomm {
namespace {

// The culprits' ops named one by one up to this many distinct ones; more are counted: the
// line stays one line however many ranks go their own way.
constexpr size_t kCulpritOpsNamed = 2;

}  // namespace

DesyncSummary summarize_desync(const std::vector<std::string>& text_by_rank) {
  DesyncSummary s;
  std::vector<std::string> order;  // texts in the order their first rank appears
  std::map<std::string, std::vector<int>> ranks_of;
  for (size_t r = 0; r < text_by_rank.size(); ++r) {
    if (!ranks_of.count(text_by_rank[r])) order.push_back(text_by_rank[r]);
    ranks_of[text_by_rank[r]].push_back(static_cast<int>(r));
  }
  // Strictly larger replaces: a tie keeps the set whose first rank is lowest.
  for (const std::string& text : order) {
    if (ranks_of[text].size() > s.agreed.size()) {
      s.agreed_text = text;
      s.agreed = ranks_of[text];
    }
  }
  for (size_t r = 0; r < text_by_rank.size(); ++r) {
    if (text_by_rank[r] == s.agreed_text) continue;
    s.culprits.push_back(static_cast<int>(r));
    s.culprit_texts.push_back(text_by_rank[r]);
  }
  s.table_rank = 0;
  return s;
}

bool table_on_every_rank(size_t size) { return size <= kRankListSpelledOut; }

std::string culprit_clause(const DesyncSummary& s) {
  // The culprits grouped by what they run, in rank order of each group's first rank.
  std::vector<std::string> order;
  std::map<std::string, std::vector<int>> ranks_of;
  for (size_t i = 0; i < s.culprits.size(); ++i) {
    if (!ranks_of.count(s.culprit_texts[i])) order.push_back(s.culprit_texts[i]);
    ranks_of[s.culprit_texts[i]].push_back(s.culprits[i]);
  }
  auto verb = [](const std::vector<int>& ranks) { return ranks.size() == 1 ? " runs " : " run "; };
  std::string clause;
  for (size_t i = 0; i < order.size() && i < kCulpritOpsNamed; ++i) {
    const std::vector<int>& ranks = ranks_of[order[i]];
    clause += (clause.empty() ? "" : ", ") + ranks_text(ranks) + verb(ranks) + order[i];
  }
  if (order.size() > kCulpritOpsNamed) {
    std::vector<int> rest;
    for (size_t i = kCulpritOpsNamed; i < order.size(); ++i) {
      rest.insert(rest.end(), ranks_of[order[i]].begin(), ranks_of[order[i]].end());
    }
    clause += ", " + ranks_text(rest) + verb(rest) + std::to_string(order.size() - kCulpritOpsNamed) + " other ops";
  }
  return clause + " where " + ranks_text(s.agreed) + verb(s.agreed) + s.agreed_text;
}

namespace {

// Where the table is, as the one-line messages end.
std::string where_the_table_is(const DesyncSummary& s) {
  return "; rank " + std::to_string(s.table_rank) + "'s error holds the table of each rank's op (in a group of more than " +
         std::to_string(kRankListSpelledOut) + " ranks, one rank shows it)";
}

}  // namespace

std::string desync_line(uint64_t seq, const DesyncSummary& s) {
  return "the ranks disagree on collective #" + std::to_string(seq) + ": " + culprit_clause(s) + where_the_table_is(s);
}

std::string split_pairs_line(uint64_t seq, const std::string& pairs, const DesyncSummary& s) {
  std::vector<std::string> lines;
  for (size_t at = 0; at < pairs.size();) {
    size_t end = pairs.find('\n', at);
    if (end == std::string::npos) end = pairs.size();
    const size_t start = pairs.find_first_not_of(' ', at);
    if (start < end) lines.push_back(pairs.substr(start, end - start));
    at = end + 1;
  }
  std::string line = "the all_to_all's splits at collective #" + std::to_string(seq) + " do not pair up: " +
                     (lines.empty() ? std::string("(no pair named)") : lines.front());
  if (lines.size() > 1) line += " (and " + std::to_string(lines.size() - 1) + " more pairs)";
  return line + where_the_table_is(s);
}

std::string quoted_desync(const std::string& message, size_t group_size) {
  static const char kHead[] = "Each rank's op there:\n";
  const size_t head = message.find(kHead);
  if (table_on_every_rank(group_size) || head == std::string::npos) return message;
  // The table's rows are indented; the first line that is not ends it (a backend's note
  // after the table, "(found by rank 14 ...)", which stays on its own line).
  std::string folded = message.substr(0, head + sizeof(kHead) - 2);  // up to the colon
  size_t at = head + sizeof(kHead) - 1;
  size_t rows = 0;
  while (at < message.size() && message[at] == ' ') {
    size_t end = message.find('\n', at);
    if (end == std::string::npos) end = message.size();
    std::string row = message.substr(at, end - at);
    row.erase(0, row.find_first_not_of(' '));
    // The head's padding ("rank 5:               all_reduce ...") goes: one space after the colon.
    const size_t colon = row.find(':');
    if (colon != std::string::npos && colon + 1 < row.size()) {
      const size_t text = row.find_first_not_of(' ', colon + 1);
      if (text != std::string::npos) row = row.substr(0, colon + 1) + " " + row.substr(text);
    }
    if (rows < kQuotedRows) folded += (rows ? " | " : " ") + row;
    ++rows;
    at = end == message.size() ? end : end + 1;
  }
  if (rows > kQuotedRows) folded += " | " + std::to_string(rows - kQuotedRows) + " more rows";
  if (at < message.size()) folded += "\n" + message.substr(at);
  return folded;
}

}  // namespace distcomm
