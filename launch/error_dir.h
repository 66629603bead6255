// The folder a launcher's ranks write their error files into (DISTCOMM_ERROR_FILE):
// $TMPDIR/distcomm-launch-<boot id>-<PID namespace>-<launcher pid>-XXXXXX, one per attempt,
// removed when the attempt ends.
//
// A launcher killed with SIGKILL (the OOM killer, a scheduler's hard stop) leaves its folder
// behind: the next attempt of a launcher of the same user, boot and PID namespace removes
// those whose launcher's pid is no longer in use, so that
// a cluster node's /tmp does not collect one per killed job.
#pragma once

#include <string>

namespace distcomm {
namespace launch {

// Makes a fresh folder under `tmp` named after this process, after removing the folders
// (and the files in them) that launchers of this user which no longer run left there.
// Empty when the folder cannot be made (the ranks then write no error file).
std::string make_error_dir(const std::string& tmp);

}  // namespace launch
}  // namespace distcomm
