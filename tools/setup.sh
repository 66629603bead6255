#!/usr/bin/env bash
# Installs every system package distcomm's build and tests need (Debian, apt-get only).
# Safe to re-run: packages already present are skipped, and apt-get is not called at all
# when nothing is missing. CUDA/NCCL are not Debian packages here: they are found at
# /usr/local/cuda when present, and the nccl plugin builds a dummy otherwise.
set -euo pipefail

packages=(
  bazel-bootstrap      # Bazel 4.2.3, the build
  g++                  # the compiler Bazel drives
  libgloo-dev          # gloo backend
  libopenmpi-dev       # mpi backend: headers and libmpi
  openmpi-bin          # mpirun, for the mpi tests
  libgflags-dev        # command-line flags in tools/ and examples/
  libgtest-dev         # GoogleTest
  googletest
  libbenchmark-dev     # Google Benchmark
  iproute2             # ip, tc: veth and shaped links for the two-host tests and tools/netns_hosts.sh
  libtorch-dev         # integrations/torch: PyTorch's C++ library (tests skip without it)
  python3-torch        # tools/torch_ddp_bench's comparison with PyTorch's DDP (no test needs it)
  python3              # tools/check_doc_links.py: tests/docs:doc_links_test
  procps               # pgrep/ps used by launcher tests
  libxml2-utils        # xmllint: the trace test checks that its SVG is well-formed XML
  cmake                # the install test builds a CMake project against an installed distcomm
  pkg-config           # ... and one with pkg-config
  binutils             # readelf: the install test checks SONAMEs and NEEDED entries
  valgrind             # shm_group_at_exit_test runs its ranks under memcheck
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup.sh: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup.sh: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup.sh: done"
