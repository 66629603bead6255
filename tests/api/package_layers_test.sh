#!/bin/bash
# api/'s folders depend on each other as ARCHITECTURE.md ("The core") says. A new include
# that breaks a rule below fails here: move the code to the folder it belongs to, or
# change the rule together with ARCHITECTURE.md.
#   1. The vocabulary at api/'s top (values, ops, errors, logging's header) includes only
#      itself, and work.cc the fork counter (process/fork_generation.h, a leaf: a Work waited
#      on in a forked child).
#   2. store/ includes only the vocabulary, store/ itself, the job's identity and the thread
#      starter (process/job_identity.h, process/thread_start.h).
#   3. process/ includes only the vocabulary, process/ itself and init.h (spawn starts a rank),
#      and spawn.cc also store/server/tcp_store_server.h (spawn serves its job's store).
#   4. No folder includes process_group.h, but hier/: the group sits on them, never under
#      them. hier/ (the hierarchy's schedules, which run ops on groups) sits above the
#      group, as hierarchical_backend.h does, and only that and hier/ include it.
#   5. Of api/'s top, a folder includes only the vocabulary, but for the exceptions
#      ARCHITECTURE.md names: group/environment.h reads into InitOptions (init.h),
#      diagnostics/flight_recorder.cc words an error as run_main does (run_main.h), and
#      process/spawn.cc starts a rank (init.h, rule 3).
set -euo pipefail
cd "${TEST_SRCDIR}/${TEST_WORKSPACE}"
[ -f api/process_group.h ] || { echo "FAILED: no sources of api/ in the runfiles (//api:source_files)"; exit 1; }
vocabulary='api/(tensor|dtype|half|device|reduce_op|errors|errors_internal|options|timeouts|work|cuda_stream|debug_level|version|language_standard)\.(h|cc)|api/logging\.h'
includes() {  # includes FILE...: "file: included" for every api/ include
  grep -Ho '#include "api/[a-z0-9_/]*\.h"' "$@" | sed -E 's@#include "(.*)"@\1@' || true
}
fail=0
check() {  # check RULE FILES_REGEX ALLOWED_REGEX [EXCEPTIONS: "file:include" lines allowed besides]
  local rule="$1" files allowed="$3" except="${4:-}" bad
  files=$(find api -name '*.h' -o -name '*.cc' | grep -E "^($2)$" | sort)
  [ -n "${files}" ] || { echo "FAILED: rule ${rule} matches no file"; fail=1; return; }
  bad=$(includes ${files} | grep -vE ":(${allowed})$" | grep -vxE "${except:-^$}" || true)
  if [ -n "${bad}" ]; then
    echo "FAILED: rule ${rule}:"
    echo "${bad}"
    fail=1
  fi
}
check 1 "${vocabulary}" "${vocabulary}" 'api/work\.cc:api/process/fork_generation\.h'
check 2 'api/store/.*' "${vocabulary}|api/store/.*|api/process/job_identity\.h|api/process/thread_start\.h"
check 3 'api/process/.*' "${vocabulary}|api/process/.*|api/init\.h" 'api/process/spawn\.cc:api/store/server/tcp_store_server\.h'
in_folders=$(find api -mindepth 2 \( -name '*.h' -o -name '*.cc' \) | grep -v '^api/hier/' | sort)
group_users=$(grep -l '#include "api/process_group.h"' ${in_folders} || true)
if [ -n "${group_users}" ]; then
  echo "FAILED: rule 4: these folders' files include process_group.h:"
  echo "${group_users}"
  fail=1
fi
top_uses=$(includes ${in_folders} | grep -E ':api/[a-z0-9_]+\.h$' | grep -vE ":(${vocabulary})$" |
  grep -vxE 'api/hier/[a-z_]+\.(h|cc):api/process_group\.h|api/group/environment\.h:api/init\.h|api/diagnostics/flight_recorder\.cc:api/run_main\.h|api/process/spawn\.cc:api/init\.h' ||
  true)
if [ -n "${top_uses}" ]; then
  echo "FAILED: rule 5: these folders' files include api/'s top beyond its vocabulary:"
  echo "${top_uses}"
  fail=1
fi
hier_users=$(find api \( -name '*.h' -o -name '*.cc' \) | grep -vE '^api/(hier/.*|hierarchical_backend\.(h|cc))$' |
  xargs grep -l '#include "api/hier/' || true)
if [ -n "${hier_users}" ]; then
  echo "FAILED: rule 4: these files include hier/, which sits above the group:"
  echo "${hier_users}"
  fail=1
fi
[ "${fail}" = 0 ] && echo "PASSED: api/'s folders keep their layers"
exit "${fail}"
