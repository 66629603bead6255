#!/usr/bin/env bash
# Builds distcomm_<version>_amd64.deb in the current folder (or the one given):
#
#   tools/package_deb.sh [OUT_DIR]
#
# The package holds what `bazel run -c opt //:install -- --prefix=/usr` installs: libraries,
# headers, pkg-config and CMake files, distcomm-launch, distcomm-bench and distcomm-trace, and
# the plugins of the backends whose libraries this machine has (a backend without its library
# is simply absent; so is libdistcomm_torch where the build found no libtorch). Depends lists
# the Debian packages of every library those files link.
# DISTCOMM_DEB_BAZEL_FLAGS replaces "-c opt" (CI sets it empty: it packages the build it has
# just tested).
set -euo pipefail
out="$(realpath "${1:-$PWD}")"
cd "$(dirname "$0")/.."
version="$(sed -n 's/^DISTCOMM_VERSION = "\(.*\)"$/\1/p' version.bzl)"
[ -n "$version" ] || { echo "package_deb: no DISTCOMM_VERSION in version.bzl" >&2; exit 1; }
arch="$(dpkg --print-architecture)"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
root="$stage/root"
# shellcheck disable=SC2086  # the flags are separate words
bazel run ${DISTCOMM_DEB_BAZEL_FLAGS--c opt} //:install -- --prefix=/usr --destdir="$root"

# Depends: the package of each shared library the files name in NEEDED (not what those
# libraries need in turn), other than distcomm's own.
needed_paths() {
  find "$root" -type f \( -name '*.so*' -o -path '*/bin/*' \) | while read -r f; do
    needed="$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')"
    LD_LIBRARY_PATH="$root/usr/lib" ldd "$f" |
      awk -v needed="$needed" 'BEGIN { n = split(needed, a, "\n"); for (i = 1; i <= n; i++) want[a[i]] = 1 }
                               $2 == "=>" && ($1 in want) && $3 ~ /^\// { print $3 }'
  done | grep -v "^$root" | sort -u
}
depends="$(needed_paths | while read -r p; do
  dpkg -S "$(realpath "$p")" 2>/dev/null || dpkg -S "$p" 2>/dev/null || true
done | cut -d: -f1 | sort -u | while read -r pkg; do
  echo "$pkg (>= $(dpkg-query -W -f='${Version}' "$pkg" | sed 's/-[^-]*$//'))"
done | paste -sd, | sed 's/,/, /g')"

# libdistcomm_torch, where the build found libtorch (a program built against it needs
# libtorch's headers too: libtorch-dev).
torch_description=""
if [ -e "$root/usr/lib/libdistcomm_torch.so.$version" ]; then
  torch_description=$'\n'" libdistcomm_torch (libtorch: torch tensors in process group ops, DDP over a"
  torch_description+=$'\n'" torch::nn::Module, DistributedSampler; distcomm-torch, distcomm::torch)."
fi

mkdir -p "$root/DEBIAN"
cat >"$root/DEBIAN/control" <<CONTROL
Package: distcomm
Version: $version
Architecture: $arch
Maintainer: distcomm developers <distcomm@localhost>
Section: libs
Priority: optional
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: $depends
Description: collective communication for C++ programs (torch.distributed without Python)
 libdistcomm (process groups, collectives, point-to-point, stores), libdistcomm_ddp
 (DistributedDataParallel), libdistcomm_ft (fault tolerance: ft::Manager), the backend
 plugins, distcomm-launch, distcomm-bench and distcomm-trace, headers
 (<distcomm/api/init.h>), pkg-config (distcomm, distcomm-ddp, distcomm-ft) and CMake
 (find_package(distcomm)) files.$torch_description
CONTROL
# The new libraries enter ld.so's cache when the package is installed or removed.
echo "activate-noawait ldconfig" >"$root/DEBIAN/triggers"

deb="$out/distcomm_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$root" "$deb" >/dev/null
echo "package_deb: $deb"
dpkg-deb --field "$deb" Version Depends
