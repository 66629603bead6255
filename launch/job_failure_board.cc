#include "launch/job_failure_board.h"

#include <sstream>

namespace distcomm {
namespace launch {

std::string FailureNote::encode() const {
  return "distcomm-launcher-failure-1\n" + std::to_string(unix_time_ns) + "\n" + std::to_string(node_rank) + "\n" +
         std::to_string(rank) + "\n" + (consequence ? "1" : "0") + "\n" + text;
}

std::optional<FailureNote> FailureNote::decode(const std::string& text) {
  std::istringstream in(text);
  std::string format, time, node, rank, consequence;
  if (!std::getline(in, format) || format != "distcomm-launcher-failure-1") return std::nullopt;
  if (!std::getline(in, time) || !std::getline(in, node) || !std::getline(in, rank) ||
      !std::getline(in, consequence) || (consequence != "0" && consequence != "1")) {
    return std::nullopt;
  }
  FailureNote n;
  try {
    n.unix_time_ns = std::stoll(time);
    n.node_rank = std::stoi(node);
    n.rank = std::stoi(rank);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  n.consequence = consequence == "1";
  const std::streamoff start = in.tellg();
  n.text = start >= 0 && static_cast<size_t>(start) < text.size() ? text.substr(static_cast<size_t>(start)) : "";
  return n;
}

std::string first_failure_key(int node_rank) { return "launch/first_failure/" + std::to_string(node_rank); }

std::string job_stop_key() { return "launch/job_stop"; }

std::string encode_job_stop(int sig, const std::string& why) {
  return "distcomm-job-stop-1\n" + std::to_string(sig) + "\n" + why;
}

std::optional<std::pair<int, std::string>> decode_job_stop(const std::string& text) {
  const std::string head = "distcomm-job-stop-1\n";
  if (text.compare(0, head.size(), head) != 0) return std::nullopt;
  const size_t end = text.find('\n', head.size());
  if (end == std::string::npos) return std::nullopt;
  int sig = 0;
  try {
    sig = std::stoi(text.substr(head.size(), end - head.size()));
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (sig <= 0 || sig >= 64) return std::nullopt;
  return std::make_pair(sig, text.substr(end + 1));
}

std::optional<FailureNote> earliest_failure(const std::vector<FailureNote>& notes) {
  const FailureNote* best = nullptr;
  for (const FailureNote& n : notes) {
    // A real failure before any consequence, whenever each was: a consequence's rank
    // reports what another's failure did to it, and may have written before the cause was
    // seen (a death unseen by anyone until its launcher's next look).
    if (best == nullptr || (best->consequence && !n.consequence) ||
        (best->consequence == n.consequence && n.unix_time_ns < best->unix_time_ns)) {
      best = &n;
    }
  }
  if (best == nullptr) return std::nullopt;
  return *best;
}

JobFailureBoardOpener& job_failure_board_opener() {
  static JobFailureBoardOpener opener;
  return opener;
}

}  // namespace launch
}  // namespace distcomm
