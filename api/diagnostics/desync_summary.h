// Where a Desync's table of each rank's op is shown, and what the other ranks say instead.
//
// Every rank that finds a Desync throws it, and every rank's error is printed (run_main, a
// launcher that prefixes each rank's stderr, a program's own catch): with the table in each,
// one disagreement at 96 ranks came out as 96 copies of the same table, 606 lines of stderr.
// In a group of more than kRankListSpelledOut ranks the table goes in the lowest rank's
// error only (the first the launcher shows, and one every rank can name without asking the
// others); each other rank's error is one line that names the culprit and that rank. A
// smaller group keeps the table on every rank: a handful of copies reads fine, and each
// rank's error then stands alone (the fault suite's three ranks each check it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace distcomm {

struct DesyncSummary {
  // What the largest set of ranks that agree runs there (ties: the set of the lowest rank),
  // and those ranks.
  std::string agreed_text;
  std::vector<int> agreed;
  // Every other rank, in rank order, and what each runs (culprit_texts[i] is culprits[i]'s).
  std::vector<int> culprits;
  std::vector<std::string> culprit_texts;
  // The rank whose error holds the whole table.
  int table_rank = 0;
};

// text_by_rank[r]: rank r's op at the sequence number, as the table writes it.
DesyncSummary summarize_desync(const std::vector<std::string>& text_by_rank);

// Whether a group of `size` ranks shows the table on every rank.
bool table_on_every_rank(size_t size);

// The one line of a rank that does not show the table: "the ranks disagree on collective #3:
// rank 7 runs all_reduce #3 int32[10] sum where 11 ranks [0-6, 8-11] run all_reduce #3
// float32[10] sum; rank 0's error holds the table of each rank's op (...)".
std::string desync_line(uint64_t seq, const DesyncSummary& summary);

// "rank 7 runs X where 11 ranks [...] run Y": who disagrees.
std::string culprit_clause(const DesyncSummary& summary);

// The same line for an all_to_all whose ops agree but whose splits do not pair up: `pairs`
// is all_to_all_mismatches' text, of which the first pair is named and the rest counted.
std::string split_pairs_line(uint64_t seq, const std::string& pairs, const DesyncSummary& summary);

// Another rank's Desync message as a rank that adopts it quotes it (GroupFailure: "rank 14
// of the group found that the ranks disagree ... Its error: <message>"): in a group of more
// than kRankListSpelledOut ranks, its table folded into one line ("... Each rank's op
// there: 15 ranks [0-4, 6-15]: all_reduce #1 float32[10] sum | rank 5: all_reduce #1
// int32[10] sum"; rows past kQuotedRows counted), so that the table is shown whole once, by
// the rank that found it, and not again by each rank that adopts its failure. Any other
// message, or a smaller group, is returned as it is.
std::string quoted_desync(const std::string& message, size_t group_size);
constexpr size_t kQuotedRows = 3;

}  // namespace distcomm
