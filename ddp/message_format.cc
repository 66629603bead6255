#include "ddp/message_format.h"

#include <cstdio>

#include "api/diagnostics/op_fingerprint.h"  // ranks_text

namespace distcomm {
namespace ddp {

std::string format_bytes(double bytes) {
  char text[32];
  if (bytes < 1024) {
    std::snprintf(text, sizeof(text), "%.0f B", bytes);
  } else if (bytes < 1024.0 * 1024.0) {
    std::snprintf(text, sizeof(text), "%.1f KiB", bytes / 1024.0);
  } else {
    std::snprintf(text, sizeof(text), "%.2f MiB", bytes / (1024.0 * 1024.0));
  }
  return text;
}

std::string rank_list(const std::vector<int>& ranks) {
  // The core's ranks_text (ranges and the count past kRankListSpelledOut ranks), in DDP's
  // spelling: without the list's brackets.
  std::string s = ranks_text(ranks);
  const size_t open = s.find('[');
  if (open != std::string::npos && s.back() == ']') s = s.substr(0, open) + s.substr(open + 1, s.size() - open - 2);
  return s;
}

}  // namespace ddp
}  // namespace distcomm
