// What a launcher does with its --trace_dir before the ranks start: an earlier job's dumps,
// launcher records and restart folders go to DIR/previous_job, so that `trace analyze` never
// reads them as this job's (trace_folder.cc says which files count as another job's when
// several machines' launchers share the folder).
#pragma once

#include <string>
#include <vector>

namespace distcomm {
namespace launch {

// Creates dir with every missing parent (mkdir -p, 0755), as torchrun makes its --log-dir:
// without it every rank's dump and every launcher record of the job were lost, and nobody
// knew until the job failed. Throws std::runtime_error naming the level that cannot be made.
void create_trace_folder(const std::string& dir);

// Creates dir if needed (create_trace_folder; a failure shows when files are written) and moves another run's trace files aside; run_id is this job's
// ("" when the launcher was given none), one_machine whether this launcher starts every
// rank of the job. Returns the lines to say (what moved, what was left and why); deletes
// nothing a move could not take.
std::vector<std::string> set_aside_earlier_trace_files(const std::string& dir, const std::string& run_id,
                                                       bool one_machine);

}  // namespace launch
}  // namespace distcomm
