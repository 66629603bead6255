// Small text helpers shared by DDP's error messages and statistics.
#pragma once

#include <string>
#include <vector>

namespace distcomm {
namespace ddp {

// "512 B", "1.5 KiB", "25.00 MiB"
std::string format_bytes(double bytes);

// "rank 3", "ranks 0, 2", and past 8 ranks "95 ranks 0-47, 49-95" (rank_list_text's ranges)
std::string rank_list(const std::vector<int>& ranks);

}  // namespace ddp
}  // namespace distcomm
