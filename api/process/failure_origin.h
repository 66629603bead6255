// Whether this process's latest group failure was its own or another rank's that it adopted
// (api/diagnostics/group_failure.h: the error it throws names that rank's failure as the
// cause). GroupFailure notes it; run_main and spawn() write it into the rank's FailureReport
// (consequence), so that the launcher and spawn name that other rank. Here, not in
// diagnostics/, because process/ (spawn) reads it and includes nothing above itself.
#pragma once

namespace distcomm {

void note_group_failure_origin(bool adopted);
// The latest, not the first: a program that survived one failure (ft/) ends by another.
// False when it was this rank's own, or none was recorded.
bool latest_group_failure_was_adopted();

}  // namespace distcomm
