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
#include <vector>

namespace distcomm {
namespace launch {

// Makes a fresh folder under `tmp` named after this process, after removing the folders
// (and the files in them) that launchers of this user which no longer run left there.
// Empty when the folder cannot be made (the ranks then write no error file); errno says why.
std::string make_error_dir(const std::string& tmp);

// make_error_dir in `tmp` (the launcher's $TMPDIR, or /tmp), else in the first of `fallbacks`
// that takes one. When `tmp` would not do, `warning` gets one line naming the folder, why,
// and where the files went instead (or that the ranks report no error): without their error
// files the launcher can only name the first rank it saw fail, which may not be the cause.
std::string make_error_dir(const std::string& tmp, const std::vector<std::string>& fallbacks, std::string* warning);

}  // namespace launch
}  // namespace distcomm
