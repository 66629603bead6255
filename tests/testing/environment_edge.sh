#!/bin/bash
# environment_edge.sh FOLDER EDGE_FILE...: the environment is read at a layer's edge. No
# source file under FOLDER calls getenv (or secure_getenv, or reads environ) but the
# EDGE_FILEs, and each of those still does (else the edge moved: update the test's list and
# the header that says where the edge is). api/ (init_process_group's and the groups'
# variables, in api/group/environment.cc; run_main.cc's DISTCOMM_ERROR_FILE as main ends)
# and ft/ (ft/ft_environment.cc, read once as a Manager is made) use it: a variable read
# deeper fails here -- read it at the edge and pass its value down.
set -euo pipefail
cd "${TEST_SRCDIR}/${TEST_WORKSPACE}"
folder="$1"
shift
edges=("$@")
allowed="^($(IFS='|'; echo "${edges[*]}" | sed 's/\./\\./g')):"
files=$(find "${folder}" -name '*.h' -o -name '*.cc' | sort)
if [ -z "${files}" ]; then
  echo "FAILED: no sources of ${folder}/ in the runfiles (//${folder}:source_files)"
  exit 1
fi
readers=$(grep -nE '\b(secure_)?getenv[[:space:]]*\(|\benviron\b' ${files} | grep -vE "${allowed}" || true)
if [ -n "${readers}" ]; then
  echo "FAILED: these read the environment inside ${folder}/ past its edge (read it in ${edges[*]} instead):"
  echo "${readers}"
  exit 1
fi
for edge in "${edges[@]}"; do
  if ! grep -qE '\bgetenv[[:space:]]*\(' "${edge}"; then
    echo "FAILED: ${edge} no longer reads the environment: update this test's edge list and the header that names it"
    exit 1
  fi
done
echo "PASSED: only ${edges[*]} read the environment in ${folder}/"
