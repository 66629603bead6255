#!/bin/bash
# The environment is read at the edge (api/group/environment.h): no file under api/ calls getenv
# (or reads environ) but environment.cc, where init_process_group's and the groups'
# variables are read, and run_main.cc, which reads DISTCOMM_ERROR_FILE as the program's
# main ends. A new getenv below init fails here: read the variable in environment.cc and
# pass its value down.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
cd "${root}"
allowed='^api/(group/environment\.cc|run_main\.cc):'
files=$(find api -name '*.h' -o -name '*.cc' | sort)
if [ -z "${files}" ]; then
  echo "FAILED: no sources of api/ in the runfiles (//api:source_files)"
  exit 1
fi
readers=$(grep -nE '\b(secure_)?getenv[[:space:]]*\(|\benviron\b' ${files} | grep -vE "${allowed}" || true)
if [ -n "${readers}" ]; then
  echo "FAILED: these read the environment below init_process_group (read it in api/group/environment.cc instead):"
  echo "${readers}"
  exit 1
fi
for edge in api/group/environment.cc api/run_main.cc; do
  if ! grep -qE '\bgetenv[[:space:]]*\(' "${edge}"; then
    echo "FAILED: ${edge} no longer reads the environment: update this test and api/group/environment.h"
    exit 1
  fi
done
echo "PASSED: only api/group/environment.cc and api/run_main.cc read the environment"
