#!/usr/bin/env bash
# distcomm used the way a project outside this repository uses it: installed into a fresh
# prefix (tools/install), then, from a folder outside the tree,
#   - the shared objects have the SONAMEs and NEEDED entries the layout promises, and every
#     header an installed header includes is installed, under its <distcomm/...> spelling;
#   - a consumer built with CMake (find_package, distcomm::ddp) and one built with
#     pkg-config run at 2 ranks under the installed distcomm-launch over gloo, which the
#     loader finds in <prefix>/lib/distcomm/plugins with no DISTCOMM_PLUGIN_PATH; so does a
#     fault-tolerant one (ft_consumer.cc: distcomm::ft::Manager, distcomm::ft / distcomm-ft);
#   - a third-party plugin built against the installed headers loads by name;
#   - every place that states the version states the same one.
set -euo pipefail
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tests/testing/skip.sh"
for tool in cmake pkg-config readelf g++; do
  command -v "$tool" >/dev/null || skip_test cmake "$tool is not installed (tools/setup.sh installs it)"
done

source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tests/tools/install/outside_prefix.sh"
outside_prefix outside

tools/install/install --prefix="$prefix"
# From here on, as a user outside the tree: no Bazel runfiles for the loader to search.
unset RUNFILES_DIR RUNFILES_MANIFEST_FILE TEST_SRCDIR

# --- one version everywhere ---
version="$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --modversion distcomm)"
major="${version%%.*}"
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "pkg-config version '$version'"
[ "$("$prefix/bin/distcomm-launch" --version)" = "launch (distcomm) $version" ] || fail "distcomm-launch --version"
[ "$("$prefix/bin/distcomm-bench" --version)" = "bench (distcomm) $version" ] || fail "distcomm-bench --version"
# The trace tool runs from the prefix (it needs libdistcomm through its rpath).
trace_usage="$("$prefix/bin/distcomm-trace" 2>&1 || true)"  # without arguments: usage, exit 2
grep -q "usage: distcomm-trace analyze" <<<"$trace_usage" || fail "distcomm-trace does not run: $trace_usage"
grep -qx "#define DISTCOMM_VERSION \"$version\"" "$prefix/include/distcomm/api/version.h" || fail "version.h"

# --- the layout, SONAMEs and NEEDED entries ---
lib="$prefix/lib"
dynamic() { readelf -d "$1" | sed -n "s/.*($2).*\[\(.*\)\]/\1/p"; }
# The SONAME's version: the major, or major.minor while the major is 0 (a 0.x minor may
# change the ABI: a program built against another one must not load this one).
if [ "$major" = 0 ]; then soname="${version%.*}"; else soname="$major"; fi
[ "$(dynamic "$lib/libdistcomm.so.$version" SONAME)" = "libdistcomm.so.$soname" ] || fail "libdistcomm SONAME"
for name in libdistcomm_ddp libdistcomm_ft; do
  [ "$(dynamic "$lib/$name.so.$version" SONAME)" = "$name.so.$soname" ] || fail "$name SONAME"
  dynamic "$lib/$name.so.$version" NEEDED | grep -qx "libdistcomm.so.$soname" ||
    fail "$name does not NEED libdistcomm.so.$soname"
done
for name in libdistcomm libdistcomm_ddp libdistcomm_ft; do
  [ "$(readlink "$lib/$name.so")" = "$name.so.$soname" ] || fail "$name.so link"
  [ "$(readlink "$lib/$name.so.$soname")" = "$name.so.$version" ] || fail "$name.so.$soname link"
done
[ -f "$lib/distcomm/plugins/libdistcomm_gloo.so" ] ||
  skip_test gloo "no gloo plugin installed: the build found no libgloo (tools/setup.sh installs it)"
[ -f "$lib/distcomm/plugins/libdistcomm_shm.so" ] || fail "no shm plugin in $lib/distcomm/plugins"
for plugin in "$lib"/distcomm/plugins/*.so; do
  # A plugin takes the core from the process that loads it; linking it would make two.
  ! dynamic "$plugin" NEEDED | grep -q '^libdistcomm' || fail "$plugin links libdistcomm"
done
! grep -rqE '#include "(api|ddp|ft|integrations)/' "$prefix/include" ||
  fail "an installed header includes \"api/...\" (or ddp/, ft/, integrations/)"
# Every header an installed header includes as "distcomm/..." is installed.
missing="$(grep -rhoE '^#include "distcomm/[^"]+"' "$prefix/include" | sed -E 's/^#include "(.*)"$/\1/' | sort -u |
  while read -r included; do [ -f "$prefix/include/$included" ] || echo "$included"; done)"
[ -z "$missing" ] || fail "installed headers include headers that are not installed:"$'\n'"$missing"
[ -f "$prefix/include/distcomm/ft/manager.h" ] || fail "no include/distcomm/ft/manager.h"
# Headers keep their folders below api/ (docs/install.md, "Headers that moved").
for header in store/tcp_store.h plugin/plugin.h diagnostics/trace_dump.h group/init_wait.h process/spawn.h; do
  [ -f "$prefix/include/distcomm/api/$header" ] || fail "no include/distcomm/api/$header"
done
[ ! -e "$prefix/include/distcomm/api/tcp_store.h" ] || fail "tcp_store.h installed at its old path"

# --- a CMake project and a pkg-config build, outside the tree ---
cp -r "$src/tests/tools/install/consumer" "$work/cmake_project"
cmake -S "$work/cmake_project" -B "$work/cmake_build" -DCMAKE_PREFIX_PATH="$prefix" >"$work/cmake.log" 2>&1 ||
  { cat "$work/cmake.log"; fail "cmake configure"; }
grep -q "distcomm $version plugins in $lib/distcomm/plugins" "$work/cmake.log" || { cat "$work/cmake.log"; fail "find_package"; }
cmake --build "$work/cmake_build" >>"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; fail "cmake build"; }

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
pkg_config_build() {  # pkg_config_build PROGRAM PACKAGE: $work/PROGRAM from the project's PROGRAM.cc
  # shellcheck disable=SC2046  # pkg-config's words are separate flags
  g++ -std=c++17 -o "$work/$1_pc" "$work/cmake_project/$1.cc" $(pkg-config --cflags --libs "$2") \
    -Wl,-rpath,"$(realpath "$(pkg-config --variable=libdir distcomm)")" || fail "pkg-config build of $1 ($2)"
}
# The .pc files name the prefix relative to themselves: a copy of the install builds against
# its own headers and libraries, not the original's.
copy="$work/copied_prefix"
cp -a "$prefix" "$copy"
copied_flags="$(PKG_CONFIG_PATH="$copy/lib/pkgconfig" pkg-config --cflags --libs distcomm-ft)"
[[ "$copied_flags" == *"-I$copy/lib/pkgconfig/../../include"* && "$copied_flags" == *"-L$copy/lib/pkgconfig/../../lib"* ]] ||
  fail "pkg-config of a copied install: $copied_flags"
[[ "$copied_flags" != *"$prefix/"* ]] || fail "a copied install's pkg-config names the original prefix: $copied_flags"
rm -rf "$copy"
# A program built as C++14 is told so by its first error, not by dozens from inside the headers.
# shellcheck disable=SC2046
c14="$(echo '#include <distcomm/api/init.h>' | g++ -std=c++14 -x c++ -fsyntax-only $(pkg-config --cflags distcomm) - 2>&1 || true)"
grep -m1 "error:" <<<"$c14" | grep -q "distcomm needs C++17 or later" || fail "a C++14 build's first error: $c14"
pkg_config_build consumer distcomm-ddp
pkg_config_build ft_consumer distcomm-ft
dynamic "$work/ft_consumer_pc" NEEDED | grep -qx "libdistcomm_ft.so.$soname" || fail "ft_consumer does not NEED libdistcomm_ft"

for program in "$work/cmake_build/consumer" "$work/consumer_pc"; do
  out="$("$prefix/bin/distcomm-launch" --nproc_per_node=2 --backend=gloo -- "$program" --ddp)" ||
    fail "$program at 2 ranks: $out"
  echo "$out"
  expect_line "$out" "[rank 0] distcomm $version (headers $version), backend gloo from $lib/distcomm/plugins/libdistcomm_gloo.so"
  expect_line "$out" "[rank 0] Rank 0 has 3"
  expect_line "$out" "[rank 0] Rank 1 has 3"
  expect_line "$out" "[rank 0] Rank 0 averaged gradient 1.5"
  expect_line "$out" "[rank 0] Rank 1 averaged gradient 1.5"
done

# Each rank of the fault-tolerant consumer commits the 3 steps in the first generation, with
# the gradients 1 and 2 summed at each: 9.
for program in "$work/cmake_build/ft_consumer" "$work/ft_consumer_pc"; do
  out="$("$prefix/bin/distcomm-launch" --nproc_per_node=2 --backend=gloo -- "$program")" ||
    fail "$program at 2 ranks: $out"
  echo "$out"
  for rank in 0 1; do
    expect_line "$out" "[rank $rank] rank$rank: 3 steps committed in generation 1 (rank0, rank1), weight 9"
  done
done

# --- a third-party plugin against the installed headers, loaded by name ---
mkdir -p "$work/my_plugins"
# shellcheck disable=SC2046
g++ -std=c++17 -shared -fPIC -o "$work/my_plugins/libdistcomm_template.so" \
  "$src/backends/template/template_backend.cc" $(pkg-config --cflags distcomm) || fail "plugin build"
! dynamic "$work/my_plugins/libdistcomm_template.so" NEEDED | grep -q '^libdistcomm' || fail "plugin links libdistcomm"
out="$(DISTCOMM_PLUGIN_PATH="$work/my_plugins" "$prefix/bin/distcomm-launch" --nproc_per_node=1 --backend=template \
  -- "$work/consumer_pc")" || fail "the template plugin: $out"
echo "$out"
expect_line "$out" "[rank 0] distcomm $version (headers $version), backend template from $work/my_plugins/libdistcomm_template.so"
expect_line "$out" "[rank 0] Rank 0 has 1"
echo "PASS: distcomm $version installed, used from CMake and pkg-config (ddp and ft), a plugin of our own loaded"
