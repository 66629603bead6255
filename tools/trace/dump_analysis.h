// `trace analyze DIR`: the ranks' trace dumps (api/diagnostics/trace_dump.h) merged into the answer to
// "which rank is behind, at which op?".
//
// Per group: each rank's last completed and last started collective; the first sequence
// number not every rank has completed, with the ranks that never issued it ("behind") and
// those waiting in it; collectives whose fingerprints differ between ranks (count, dtype,
// root, reduction, op); ranks of the group without a dump. Then the first failure of the
// job by time.
#pragma once

#include <string>
#include <vector>

#include "tools/trace/json_value.h"

namespace distcomm {
namespace trace {

struct RankDump {
  std::string path;
  JsonValue doc;
};

// Every rank_*.json in dir (and pid_*.json), parsed. Throws std::runtime_error naming the
// file that is not a dump, or when there is none.
std::vector<RankDump> load_dumps(const std::string& dir);

// The report, as printed.
std::string analyze_dumps(const std::vector<RankDump>& dumps);

}  // namespace trace
}  // namespace distcomm
