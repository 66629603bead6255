#!/usr/bin/env bash
# Installs distcomm under a prefix:
#
#   bazel run -c opt //:install -- --prefix=DIR [--destdir=STAGE]
#
#   DIR/include/distcomm/{api,ddp,ft}/**.h  included as <distcomm/api/init.h>, <distcomm/api/store/tcp_store.h>
#   DIR/include/distcomm/integrations/torch/*.h   <distcomm/integrations/torch/tensor_bridge.h> (*)
#   DIR/lib/libdistcomm.so.X.Y.Z            SONAME libdistcomm.so.S, links .so.S and .so
#   DIR/lib/libdistcomm_ddp.so.X.Y.Z        likewise; NEEDED libdistcomm.so.S
#   DIR/lib/libdistcomm_ft.so.X.Y.Z         likewise (distcomm::ft::Manager)
#   DIR/lib/libdistcomm_torch.so.X.Y.Z      likewise; NEEDED libdistcomm_ddp.so.S, libdistcomm.so.S, libtorch (*)
#   (S, the SONAME version: X, or X.Y while X is 0; version.bzl)
#   DIR/lib/distcomm/plugins/libdistcomm_<name>.so   found by the loader with no variable set
#   DIR/bin/distcomm-launch, distcomm-bench, distcomm-trace
#   DIR/lib/pkgconfig/distcomm.pc, distcomm-ddp.pc, distcomm-ft.pc, distcomm-torch.pc (*)
#   DIR/lib/cmake/distcomm/distcommConfig.cmake, distcommConfigVersion.cmake,
#                          distcommTorchTargets.cmake (*: distcomm::torch)
#
# (*) integrations/torch, only where the build found libtorch; elsewhere the manifest says
# why it is missing, and this script prints that.
#
# --destdir=STAGE writes everything under STAGE/DIR while the files still name DIR (for
# packaging: tools/package_deb.sh). What to install comes from manifest.txt (BUILD).
set -euo pipefail

usage() { echo "usage: install --prefix=DIR [--destdir=STAGE]" >&2; exit 2; }

prefix=""
destdir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix=*) prefix="${1#--prefix=}" ;;
    --prefix) [ $# -ge 2 ] || usage; prefix="$2"; shift ;;
    --destdir=*) destdir="${1#--destdir=}" ;;
    --destdir) [ $# -ge 2 ] || usage; destdir="$2"; shift ;;
    -h | --help) usage ;;
    *) echo "install: unknown argument '$1'" >&2; usage ;;
  esac
  shift
done
[ -n "$prefix" ] || { echo "install: --prefix=DIR is required" >&2; usage; }

# Relative paths mean the folder `bazel run` was started from.
caller_dir="${BUILD_WORKING_DIRECTORY:-$PWD}"
absolute() { case "$1" in /*) echo "$1" ;; *) echo "$caller_dir/$1" ;; esac; }
prefix="$(absolute "$prefix")"
prefix="${prefix%/}"
[ -z "$destdir" ] || destdir="$(absolute "$destdir")"

# The runfiles of this script: where `bazel run` starts it, or beside the script.
if [ -f tools/install/manifest.txt ]; then
  files="$PWD"
elif [ -f "$0.runfiles/distcomm/tools/install/manifest.txt" ]; then
  files="$0.runfiles/distcomm"
else
  echo "install: cannot find the build's files (run it with bazel run //:install)" >&2
  exit 1
fi

version="$(sed -n 's/^#define DISTCOMM_VERSION "\(.*\)"$/\1/p' "$files/api/version.h")"
soname_version="$(sed -n 's/^#define DISTCOMM_SONAME_VERSION "\(.*\)"$/\1/p' "$files/api/version.h")"
[ -n "$version" ] || { echo "install: no DISTCOMM_VERSION in api/version.h" >&2; exit 1; }

root="$destdir$prefix"
install -d "$root/include/distcomm/api" "$root/include/distcomm/ddp" "$root/include/distcomm/ft" \
  "$root/lib/distcomm/plugins" "$root/bin" "$root/lib/pkgconfig" "$root/lib/cmake/distcomm"

count=0
while read -r kind path; do
  src="$files/$path"
  name="$(basename "$path")"
  case "$kind" in
    header)
      # In the repository headers include each other as "api/store/x.h" (or "ddp/x.h",
      # "ft/x.h", "integrations/torch/x.h"); installed, that is "distcomm/api/store/x.h" (found through
      # -I<prefix>/include, or /usr/include). The path below include/distcomm is the
      # header's path in the repository.
      sub="$(dirname "$path")"
      install -d "$root/include/distcomm/$sub"
      sed -E 's@^#include "(api|ddp|ft|integrations)/@#include "distcomm/\1/@' "$src" >"$root/include/distcomm/$sub/$name"
      chmod 644 "$root/include/distcomm/$sub/$name"
      ;;
    lib)
      base="${name%%.so.*}.so"  # libdistcomm.so.0.3 -> libdistcomm.so
      install -m 755 "$src" "$root/lib/$base.$version"
      ln -sfn "$base.$version" "$root/lib/$base.$soname_version"
      ln -sfn "$base.$soname_version" "$root/lib/$base"
      ;;
    plugin) install -m 755 "$src" "$root/lib/distcomm/plugins/$name" ;;
    bin:*) install -m 755 "$src" "$root/bin/${kind#bin:}" ;;
    pkgconfig)
      # The prefix as seen from the .pc file itself (pkg-config's pcfiledir): a copied or
      # moved install then builds against its own headers, not the first one's.
      sed 's|@prefix@|${pcfiledir}/../..|' "$src" >"$root/lib/pkgconfig/$name"
      chmod 644 "$root/lib/pkgconfig/$name"
      ;;
    cmake) install -m 644 "$src" "$root/lib/cmake/distcomm/$name" ;;
    missing)  # "missing <what>: <why>", the rest of the line
      echo "install: not installed: $path"
      continue
      ;;
    *) echo "install: unknown kind '$kind' in manifest.txt" >&2; exit 1 ;;
  esac
  count=$((count + 1))
done <"$files/tools/install/manifest.txt"

echo "install: distcomm $version, $count files under $root"
