// ProcessGroup: DISTCOMM_DEBUG's levels and INFO's logs (api/debug_level.h); DETAIL's checks
// are api/ops/detail_checks.h.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "api/errors.h"
#include "api/logging.h"
#include "api/ops/op_numbering.h"
#include "api/process_group.h"
#include "api/diagnostics/flight_recorder.h"
#include "api/diagnostics/progress_report.h"

namespace distcomm {

DebugLevel parse_debug_level(const std::string& text) {
  std::string upper;
  for (char c : text) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper.empty() || upper == "OFF") return DebugLevel::kOff;
  if (upper == "INFO") return DebugLevel::kInfo;
  if (upper == "DETAIL") return DebugLevel::kDetail;
  throw InvalidArgument("debug level '" + text + "' (DISTCOMM_DEBUG or InitOptions::debug) must be OFF, INFO or DETAIL");
}

const char* debug_level_name(DebugLevel level) {
  switch (level) {
    case DebugLevel::kOff: return "OFF";
    case DebugLevel::kInfo: return "INFO";
    case DebugLevel::kDetail: return "DETAIL";
  }
  return "?";
}

void ProcessGroup::log_created() {
  if (options_.debug == DebugLevel::kOff) return;
  std::string ranks;
  for (int r : options_.global_ranks) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  ordered_print(*this,
                "group '" + name() + "' created: rank " + std::to_string(rank()) + " of " + std::to_string(size()) +
                    " (global ranks [" + ranks + "]), backend " + backend_name() + ", timeout " +
                    std::to_string(timeout().count()) + " ms, DISTCOMM_DEBUG=" + debug_level_name(options_.debug),
                /*prefix=*/true, /*to_stderr=*/true);
}

namespace {

bool is_point_to_point(OpType op) {
  return op == OpType::kSend || op == OpType::kRecv || op == OpType::kRecvAnySource || op == OpType::kBatchP2P;
}

}  // namespace

std::vector<uint64_t> ProcessGroup::ops_not_ended() const {
  // The recorder knows which ops have not ended (none without it: DISTCOMM_TRACE_BUFFER=0).
  // After abort() the program asked for their end.
  std::vector<uint64_t> ids;
  if (!recorder_ || aborted_) return ids;
  for (const TraceEntry& e : recorder_->snapshot()) {
    if (e.state != TraceEntry::State::kQueued && e.state != TraceEntry::State::kStarted) continue;
    if (!e.fingerprint.internal) ids.push_back(e.id);
  }
  return ids;
}

void ProcessGroup::warn_of_ops_cut_off(const std::vector<uint64_t>& not_ended_before) const {
  // Only the ops the shutdown did not let end: the nccl backend lets the GPU finish what a
  // returned wait() left queued on a stream, and those ops' results are there.
  if (not_ended_before.empty()) return;
  std::vector<std::string> open;
  for (const TraceEntry& e : recorder_->snapshot()) {
    if (e.state == TraceEntry::State::kCompleted) continue;
    if (std::find(not_ended_before.begin(), not_ended_before.end(), e.id) == not_ended_before.end()) continue;
    open.push_back(std::string(op_type_name(e.fingerprint.op)) + (e.fingerprint.p2p ? " p2p#" : " #") +
                   std::to_string(e.fingerprint.seq));
  }
  if (open.empty()) return;
  std::string named;
  for (size_t i = 0; i < open.size() && i < 3; ++i) named += (i ? ", " : "") + open[i];
  if (open.size() > 3) named += ", ... " + open.back();
  // A destroyed group cuts its ops off (c10d's gloo group would finish them first): a
  // program that never waits on its last async op would otherwise lose it without a word.
  log_line_as(rank(), size(),
              "distcomm: group '" + name() + "' destroyed with " + std::to_string(open.size()) +
                  (open.size() == 1 ? " op" : " ops") + " not finished (" + named +
                  "): they end with a PeerFailure and their results are lost; wait() on an op before the group "
                  "goes to keep it");
}

void ProcessGroup::log_destroyed() const {
  if (options_.debug == DebugLevel::kOff) return;
  // Each rank on its own, not in rank order: ordering needs the others, and a destructor
  // must not wait for a rank that may be gone.
  uint64_t totals[2] = {0, 0};  // collectives, point to point
  std::string lists[2];
  for (size_t i = 0; i <= static_cast<size_t>(OpType::kBatchP2P); ++i) {
    const auto op = static_cast<OpType>(i);
    const uint64_t n = numbering_->issued(op);
    if (n == 0) continue;
    const int which = is_point_to_point(op) ? 1 : 0;
    totals[which] += n;
    lists[which] += (lists[which].empty() ? "" : ", ") + std::to_string(n) + " " + op_type_name(op);
  }
  auto part = [&](int which, const char* one, const char* many) {
    return std::to_string(totals[which]) + " " + (totals[which] == 1 ? one : many) +
           (lists[which].empty() ? "" : " (" + lists[which] + ")");
  };
  log_line_as(rank(), size(),
              "group '" + name() + "' destroyed: this rank issued " + part(0, "collective", "collectives") + " and " +
                  part(1, "point-to-point op", "point-to-point ops"));
}

}  // namespace distcomm
