// `trace analyze DIR`: the ranks' trace dumps (api/diagnostics/trace_dump.h) merged into the answer to
// "which rank is behind, at which op?".
//
// Per group: each rank's last completed and last started collective; the first sequence
// number not every rank has completed, with the ranks that never issued it ("behind") and
// those waiting in it; collectives whose fingerprints differ between ranks (count, dtype,
// root, reduction, op); ranks of the group without a dump, and how they ended when the
// launcher says (launcher_node<N>.json). Then the first failure of the job by time.
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

// What a folder holds for `analyze`: the dumps of one job, the files of other jobs left
// out (and why), and what the launchers saw of the job (launcher_node<N>.json, one per
// machine, tools/launch --trace_dir), those of the same job.
struct DumpFolder {
  std::vector<RankDump> dumps;
  std::vector<std::string> left_out;  // "rank_1.json (run a1b2, an earlier job: ...)"
  // Files that could not be read as a dump or record, each with why ("rank_97.json: not
  // valid JSON at byte 3494: text after the end of the document"): reported, and the rest
  // analysed (their ranks as ranks without a dump).
  std::vector<std::string> unreadable;
  std::string run_id;                 // the job analysed ("" when its dumps carry none)
  // launcher_node<N>.json (and a plain launcher.json), by node rank: {"format":
  // "distcomm-launcher-record", "node_rank", ...}. Every machine's launcher writes its own.
  std::vector<JsonValue> launchers;
};

// Every rank_*.json in dir (and pid_*.json), parsed, and the launchers' records. Dumps of several
// jobs (DISTCOMM_RUN_ID: "run_id" in each) are not mixed: the newest job's (by the time its
// files were written) are analysed, the others left out. A file that is not JSON or not a
// dump (a rank killed while it wrote by hand, a stray file) goes to `unreadable`. Throws
// std::runtime_error when nothing can be read (naming each file and why).
DumpFolder load_dump_folder(const std::string& dir);
// The same over several folders read as one (a job over several machines leaves a folder
// on each: tools/launch --trace_dir on every node); a rank found in two keeps its newest
// dump. Files are named with their folder.
DumpFolder load_dump_folders(const std::vector<std::string>& dirs);
// load_dump_folder(dir).dumps.
std::vector<RankDump> load_dumps(const std::string& dir);

// The report, as printed.
std::string analyze_dumps(const std::vector<RankDump>& dumps);
// The same, with the files left out and the launcher's view of the ranks that left no dump
// (a rank SIGKILLed is named as dead, not merely absent).
std::string analyze_folder(const DumpFolder& folder);

}  // namespace trace
}  // namespace distcomm
