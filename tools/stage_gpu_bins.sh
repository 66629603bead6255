#!/usr/bin/env bash
# Builds the nccl backend's GPU checks here (no GPU needed) and stages them in .device_bin/
# (git-ignored) for tools/gpu_check.sh, which runs them on a GPU machine without Bazel:
#   .device_bin/bin/         the nccl test binaries, the GPU probe, the all_reduce bandwidth
#                            program and its NCCL-only baseline (raw_nccl_all_reduce)
#   .device_bin/lib/         libdistcomm.so.<SONAME version>, the nccl and gloo plugins, and the shared
#                            libraries they resolve here, except glibc's own, the GPU driver and
#                            NCCL itself (218 MB: gpu_check.sh finds it on the GPU machine)
#   .device_bin/BUILD_INFO   the NCCL and CUDA versions the binaries were built against
# Everything is stripped of debug info. What can be carried to a device machine is 64 MiB
# in all: the script prints the folder's size and fails if it is not under that.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=.device_bin
LIMIT_BYTES=$((64 << 20))
TESTS=(nccl_plugin_test nccl_init_test nccl_mixed_group_test nccl_cuda_ops_test nccl_cuda_streams_test
       nccl_cuda_failure_test nccl_cuda_lifecycle_test nccl_cuda_p2p_test nccl_cuda_subgroup_test
       nccl_conformance_test)
PROGRAMS=("${TESTS[@]}" gpu_probe nccl_all_reduce_bandwidth raw_nccl_all_reduce)

# The core is named by its SONAME, libdistcomm.so.<major>, or .<major>.<minor> while the
# major is 0 (version.bzl's DISTCOMM_SONAME_VERSION).
version=$(sed -n 's/^DISTCOMM_VERSION = "\(.*\)"$/\1/p' version.bzl)
if [ "${version%%.*}" = 0 ]; then CORE=libdistcomm.so.${version%.*}; else CORE=libdistcomm.so.${version%%.*}; fi
targets=(//api:$CORE //backends/nccl:libdistcomm_nccl.so //backends/gloo:libdistcomm_gloo.so)
for p in "${PROGRAMS[@]}"; do targets+=("//tests/backends/nccl:$p"); done
bazel build "${targets[@]}"

LIBS=(bazel-bin/api/$CORE bazel-bin/backends/nccl/libdistcomm_nccl.so bazel-bin/backends/gloo/libdistcomm_gloo.so)
BINS=()
for p in "${PROGRAMS[@]}"; do BINS+=("bazel-bin/tests/backends/nccl/$p"); done

rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/lib"
cp "${LIBS[@]}" "$OUT/lib/"
cp "${BINS[@]}" "$OUT/bin/"

# Bazel links test binaries against its own shared libraries (_solib_k8/..., found through
# a relative rpath that does not survive the copy): bring every library the binaries and
# plugins resolve where Bazel built them, under the name they ask for.
for f in "${BINS[@]}" "${LIBS[@]}"; do ldd "$f"; done | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' |
  sort -u | while read -r name path; do
    case "$name" in
      libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | ld-linux* | libresolv.so* | \
      libcuda.so* | libnvidia* | libnccl.so*) continue ;;
    esac
    [[ -e "$OUT/lib/$name" ]] || cp -L "$path" "$OUT/lib/$name"
  done

chmod -R u+w "$OUT"
strip --strip-debug "$OUT"/bin/* "$OUT"/lib/* 2>/dev/null || true

# What gpu_check.sh compares with the machine's libnccl.so.2 (NCCL_VERSION_CODE as
# ncclGetVersion reports it, and the dotted form).
header_version() { sed -n "s/^#define $1 *\([0-9]*\).*/\1/p" "$2" | head -n 1; }
NCCL_H=$(find -L bazel-"$(basename "$PWD")"/external/system_nccl /usr/local/cuda/include /usr/include -maxdepth 3 \
           -name nccl.h 2>/dev/null | head -n 1 || true)
CUDA_H=$(find -L /usr/local/cuda/include -maxdepth 1 -name cuda_runtime_api.h 2>/dev/null | head -n 1 || true)
{
  if [[ -n "$NCCL_H" ]]; then
    major=$(header_version NCCL_MAJOR "$NCCL_H")
    minor=$(header_version NCCL_MINOR "$NCCL_H")
    patch=$(header_version NCCL_PATCH "$NCCL_H")
    echo "nccl_built=$major.$minor.$patch"
    echo "nccl_built_code=$((major * 10000 + minor * 100 + patch))"
  fi
  [[ -n "$CUDA_H" ]] && echo "cudart_built=$(header_version CUDART_VERSION "$CUDA_H")"
  echo "staged=$(date -u +%Y-%m-%dT%H:%M:%SZ) from $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
} >"$OUT/BUILD_INFO"

bytes=$(du -sb "$OUT" | cut -f1)
echo "staged in $OUT/: $(ls "$OUT/bin" | wc -l) programs, $(ls "$OUT/lib" | wc -l) libraries," \
     "$((bytes / 1024)) KiB ($(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }') MiB of the 64 MiB that can be carried)"
sed 's/^/  /' "$OUT/BUILD_INFO"
if ((bytes >= LIMIT_BYTES)); then
  echo "stage_gpu_bins: FAILED: $OUT is $bytes bytes, not under 64 MiB: it cannot be carried to the device" >&2
  exit 1
fi
echo "on the GPU machine: tools/gpu_check.sh"
