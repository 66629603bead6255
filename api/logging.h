// Rank-aware logging: every line carries "[rank R/W]".
//
// Three modes: every rank prints; rank 0 only; and ordered, where the lines of all ranks
// come out in rank order -- the answer to "every rank prints and the lines come out
// jumbled", done in one gather of the group's host exchange (each rank posts its text,
// rank 0 prints them in order) instead of one barrier per rank.
#pragma once

#include <sstream>
#include <string>

namespace distcomm {

class ProcessGroup;

enum class LogMode { kEveryRank, kRankZero, kOrdered };

// Sets the rank/world shown in the prefix (init_process_group does it).
void set_log_identity(int rank, int world_size);
// "[rank 1/4] " (or "" before init).
std::string log_prefix();

// One line from this rank, prefixed, written atomically to stderr.
void log_line(const std::string& text);
// The same from rank `rank` of a group of `size` (a subgroup's own numbering, which the
// process-wide prefix does not show).
void log_line_as(int rank, int size, const std::string& text);
// "[rank 1/4] "
std::string rank_prefix(int rank, int size);
// Only rank 0 prints (other ranks return at once).
void log_rank_zero(const std::string& text);

// Collective over pg: every rank calls it; rank 0 prints every rank's text in rank order
// (each line prefixed with the rank in pg), to stdout (to stderr with to_stderr, for logs).
// Text may hold several lines. Returns when rank 0 has printed; other ranks return as soon
// as their text is posted (over a shared store; a group without one waits for the
// exchange's collective).
void ordered_print(ProcessGroup& pg, const std::string& text, bool prefix = true, bool to_stderr = false);

// Dispatches on mode (kOrdered needs pg).
void log_with_mode(LogMode mode, ProcessGroup* pg, const std::string& text);

}  // namespace distcomm
