#!/usr/bin/env bash
# Installs a distcomm .deb on this machine, builds and runs a program against it from /usr
# (and a libtorch one, where the package has libdistcomm_torch), then removes it and checks that every file it installed is gone. Changes the system:
# run as root on a machine you may change (CI does, after the tests).
#
#   tests/tools/install/deb_check.sh distcomm_0.3.0_amd64.deb
set -euo pipefail
deb="$(realpath "$1")"
here="$(cd "$(dirname "$0")" && pwd)"
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "dpkg -i needs root"
! dpkg-query -W distcomm >/dev/null 2>&1 || fail "a distcomm package is installed already; remove it first"
work="$(mktemp -d)"
trap 'rm -rf "$work"; dpkg -r distcomm >/dev/null 2>&1 || true' EXIT

dpkg -i "$deb"
version="$(dpkg-query -W -f='${Version}' distcomm)"
dpkg -L distcomm | while read -r f; do [ -d "$f" ] || echo "$f"; done >"$work/files"
echo "installed $(wc -l <"$work/files") files"

# A program outside any tree, against /usr: no PKG_CONFIG_PATH, no rpath, no plugin path.
unset DISTCOMM_PLUGIN_PATH PKG_CONFIG_PATH LD_LIBRARY_PATH
[ "$(pkg-config --modversion distcomm)" = "$version" ] || fail "pkg-config --modversion"
# shellcheck disable=SC2046
g++ -std=c++17 -o "$work/consumer" "$here/consumer/consumer.cc" $(pkg-config --cflags --libs distcomm-ddp)
out="$(distcomm-launch --nproc_per_node=2 --backend=gloo -- "$work/consumer" --ddp)"
echo "$out"
grep -qxF "[rank 0] Rank 1 has 3" <<<"$out" || fail "all_reduce result"
grep -qxF "[rank 0] Rank 1 averaged gradient 1.5" <<<"$out" || fail "DDP result"
grep -qF "backend gloo from /usr/lib/distcomm/plugins/libdistcomm_gloo.so" <<<"$out" || fail "plugin location"
cmake -S "$here/consumer" -B "$work/cmake_build" >/dev/null && cmake --build "$work/cmake_build" >/dev/null ||
  fail "CMake build against /usr"
# libdistcomm_torch, where the package has it (its build found libtorch): a libtorch program
# (libtorch's headers come from libtorch-dev), with pkg-config and with CMake.
if [ -e /usr/lib/libdistcomm_torch.so ]; then
  # shellcheck disable=SC2046
  g++ -std=c++17 -o "$work/torch_consumer" "$here/torch_consumer/torch_consumer.cc" $(pkg-config --cflags --libs distcomm-torch) ||
    fail "pkg-config build of torch_consumer against /usr"
  out="$(distcomm-launch --nproc_per_node=2 -- "$work/torch_consumer")"
  echo "$out"
  grep -qxF "[rank 0] Rank 1 has 3 3 3" <<<"$out" || fail "all_reduce of a torch tensor"
  grep -qxF "[rank 0] Rank 1 averaged gradient 1.5 1.5" <<<"$out" || fail "torch DDP result"
  cmake -S "$here/torch_consumer" -B "$work/torch_cmake_build" >/dev/null && cmake --build "$work/torch_cmake_build" >/dev/null ||
    fail "CMake build of torch_consumer against /usr"
else
  echo "no libdistcomm_torch in the package (its build found no libtorch)"
fi

dpkg -r distcomm
left="$(while read -r f; do if [ -e "$f" ] || [ -L "$f" ]; then echo "$f"; fi; done <"$work/files")"
[ -z "$left" ] || fail "dpkg -r left files behind:"$'\n'"$left"
echo "PASS: distcomm $version installed from $deb, used from /usr, removed with every file"
