#!/bin/bash
# ft's environment is read at its edge (ft/ft_environment.h): no file under ft/ calls getenv
# (or reads environ) but ft_environment.cc, which ft::Manager's constructor calls once. A new
# getenv elsewhere in ft/ fails here: read the variable in ft_environment.cc (FtEnvironment)
# and pass its value down, as api/group/environment.cc does for the core.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
cd "${root}"
allowed='^ft/ft_environment\.cc:'
files=$(find ft -name '*.h' -o -name '*.cc' | sort)
if [ -z "${files}" ]; then
  echo "FAILED: no sources of ft/ in the runfiles (//ft:source_files)"
  exit 1
fi
readers=$(grep -nE '\b(secure_)?getenv[[:space:]]*\(|\benviron\b' ${files} | grep -vE "${allowed}" || true)
if [ -n "${readers}" ]; then
  echo "FAILED: these read the environment inside ft (read it in ft/ft_environment.cc instead):"
  echo "${readers}"
  exit 1
fi
if ! grep -qE '\bgetenv[[:space:]]*\(' ft/ft_environment.cc; then
  echo "FAILED: ft/ft_environment.cc no longer reads the environment: update this test and ft/ft_environment.h"
  exit 1
fi
echo "PASSED: only ft/ft_environment.cc reads the environment in ft/"
