#!/usr/bin/env bash
# integrations/torch as a libtorch project outside this repository uses it: installed into a
# fresh prefix (tools/install) where the build found libtorch, then, from a folder outside the
# tree,
#   - libdistcomm_torch has its SONAME and links, NEEDs libdistcomm_ddp, libdistcomm and
#     libtorch, and defines none of ddp's or the core's functions itself (one copy of each in
#     a process); its headers are under include/distcomm/integrations/torch/ and include only
#     installed headers;
#   - torch_consumer/torch_consumer.cc, built with CMake (find_package(distcomm COMPONENTS
#     torch), distcomm::torch) and with pkg-config (distcomm-torch), runs at 2 ranks under the
#     installed distcomm-launch: the all_reduce of a torch tensor, and one DDP step of a
#     torch::nn::Linear (rank 0's weight broadcast, the gradients averaged);
#   - find_package(distcomm COMPONENTS <one not installed>) stops, naming it.
# Where the build found no libtorch the install says so and installs none of it: this test
# skips with that line. Compiling the consumer (torch's headers) is the slow part, 12 s per
# build at load 1 on the 2 cores, more when loaded: the two builds run side by side.
set -euo pipefail
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tests/testing/skip.sh"
for tool in cmake pkg-config readelf nm g++; do
  command -v "$tool" >/dev/null || skip_test cmake "$tool is not installed (tools/setup.sh installs it)"
done

source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tests/tools/install/outside_prefix.sh"
outside_prefix outside_torch

installed="$(tools/install/install --prefix="$prefix")" || fail "install: $installed"
echo "$installed"
not_installed="$(grep '^install: not installed: libdistcomm_torch' <<<"$installed" || true)"
if [ -n "$not_installed" ]; then
  if [ -e "$prefix/lib/pkgconfig/distcomm-torch.pc" ] || [ -e "$prefix/include/distcomm/integrations" ]; then
    fail "the install says libdistcomm_torch is not installed, yet installed part of it"
  fi
  skip_test torch "${not_installed#install: }"
fi
# From here on, as a user outside the tree: no Bazel runfiles for the loader to search.
unset RUNFILES_DIR RUNFILES_MANIFEST_FILE TEST_SRCDIR
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"

version="$(pkg-config --modversion distcomm)"
[ "$(pkg-config --modversion distcomm-torch)" = "$version" ] || fail "distcomm-torch.pc's version"
major="${version%%.*}"
if [ "$major" = 0 ]; then soname="${version%.*}"; else soname="$major"; fi

# --- the library: SONAME, links, NEEDED, and no second copy of ddp or the core ---
lib="$prefix/lib"
so="$lib/libdistcomm_torch.so.$version"
[ -f "$so" ] || fail "no $so"
dynamic() { readelf -d "$1" | sed -n "s/.*($2).*\[\(.*\)\]/\1/p"; }
[ "$(dynamic "$so" SONAME)" = "libdistcomm_torch.so.$soname" ] || fail "libdistcomm_torch SONAME"
[ "$(readlink "$lib/libdistcomm_torch.so")" = "libdistcomm_torch.so.$soname" ] || fail "libdistcomm_torch.so link"
[ "$(readlink "$lib/libdistcomm_torch.so.$soname")" = "libdistcomm_torch.so.$version" ] || fail "libdistcomm_torch.so.$soname link"
needed="$(dynamic "$so" NEEDED)"
for name in libdistcomm_ddp.so.$soname libdistcomm.so.$soname; do
  grep -qx "$name" <<<"$needed" || fail "libdistcomm_torch does not NEED $name:"$'\n'"$needed"
done
grep -q '^libtorch' <<<"$needed" || fail "libdistcomm_torch does not NEED libtorch:"$'\n'"$needed"
# The functions it defines (T) that libdistcomm_ddp or libdistcomm define too: with a copy of
# their objects inside, it would have a second reducer, registry, ... in the process.
functions() { nm -D --defined-only "$1" | awk '$2 == "T" { print $3 }' | sort -u; }
for other in libdistcomm_ddp libdistcomm; do
  twice="$(comm -12 <(functions "$so") <(functions "$lib/$other.so.$version"))"
  [ -z "$twice" ] || fail "libdistcomm_torch defines $(wc -l <<<"$twice") functions of $other itself (a copy of its objects), e.g.:"$'\n'"$(head -n 5 <<<"$twice")"
done

# --- the headers ---
headers="$prefix/include/distcomm/integrations/torch"
for header in distributed_data_parallel.h distributed_sampler.h tensor_bridge.h; do
  [ -f "$headers/$header" ] || fail "no $headers/$header"
done
! grep -rqE '#include "(api|ddp|ft|integrations)/' "$headers" || fail "an installed torch header includes an in-tree path"
missing="$(grep -rhoE '^#include "distcomm/[^"]+"' "$headers" | sed -E 's/^#include "(.*)"$/\1/' | sort -u |
  while read -r included; do [ -f "$prefix/include/$included" ] || echo "$included"; done)"
[ -z "$missing" ] || fail "the torch headers include headers that are not installed:"$'\n'"$missing"

# --- a CMake project and a pkg-config build of the consumer, side by side ---
cp -r "$src/tests/tools/install/torch_consumer" "$work/project"
(cmake -S "$work/project" -B "$work/cmake_build" -DCMAKE_PREFIX_PATH="$prefix" &&
  cmake --build "$work/cmake_build") >"$work/cmake.log" 2>&1 &
cmake_pid=$!
# shellcheck disable=SC2046  # pkg-config's words are separate flags
g++ -std=c++17 -o "$work/torch_consumer_pc" "$work/project/torch_consumer.cc" $(pkg-config --cflags --libs distcomm-torch) \
  -Wl,-rpath,"$(pkg-config --variable=libdir distcomm)" >"$work/pkg_config.log" 2>&1 ||
  { kill "$cmake_pid" 2>/dev/null || true; cat "$work/pkg_config.log"; fail "pkg-config build of torch_consumer (distcomm-torch)"; }
wait "$cmake_pid" || { cat "$work/cmake.log"; fail "CMake build of torch_consumer (distcomm::torch)"; }

for program in "$work/cmake_build/torch_consumer" "$work/torch_consumer_pc"; do
  dynamic "$program" NEEDED | grep -qx "libdistcomm_torch.so.$soname" || fail "$program does not NEED libdistcomm_torch"
  out="$("$prefix/bin/distcomm-launch" --nproc_per_node=2 --backend=shm -- "$program" 2>&1)" ||
    fail "$program at 2 ranks: $out"
  echo "$out"
  for rank in 0 1; do
    expect_line "$out" "[rank 0] Rank $rank has 3 3 3"
    expect_line "$out" "[rank 0] Rank $rank weight 10 10"
    expect_line "$out" "[rank 0] Rank $rank averaged gradient 1.5 1.5"
  done
done

# --- a component that is not installed stops find_package ---
mkdir -p "$work/no_component"
cat >"$work/no_component/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(no_component CXX)
find_package(distcomm 0.1 REQUIRED COMPONENTS torch nosuch)
CMAKE
if cmake -S "$work/no_component" -B "$work/no_component/build" -DCMAKE_PREFIX_PATH="$prefix" >"$work/no_component.log" 2>&1; then
  cat "$work/no_component.log"
  fail "find_package(distcomm COMPONENTS nosuch) succeeded"
fi
# (CMake wraps the message: compare it with its lines joined.)
tr -s ' \n' '  ' <"$work/no_component.log" | grep -qF "no distcomm::nosuch in $prefix (distcomm::torch is installed only" ||
  { cat "$work/no_component.log"; fail "find_package's message"; }
echo "PASS: libdistcomm_torch $version installed, a libtorch program built with CMake and pkg-config ran at 2 ranks"
