#!/bin/bash
# Runs tools/check_doc_links.py over the pages in this test's runfiles (see BUILD).
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
if ! command -v python3 >/dev/null; then
  echo "FAILED: python3 is not installed (tools/setup.sh installs it)"
  exit 1
fi
exec python3 "${root}/tools/check_doc_links.py" "${root}"
