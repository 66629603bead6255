#!/usr/bin/env bash
# Builds the nccl backend's GPU checks here (no GPU needed) and stages them in .device_bin/
# (git-ignored) for tools/gpu_check.sh, which runs them on a GPU machine without Bazel:
#   .device_bin/bin/  the nccl test binaries, the GPU probe and the all_reduce bandwidth program
#   .device_bin/lib/  libdistcomm.so.<major>, the nccl and gloo plugins, and the shared libraries
#                     they resolve here, except glibc's own, the GPU driver and NCCL itself
#                     (218 MB: gpu_check.sh finds it on the GPU machine)
# Everything is stripped of debug info so the folder stays small enough to carry.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=.device_bin
TESTS=(nccl_plugin_test nccl_init_test nccl_mixed_group_test nccl_cuda_ops_test nccl_cuda_streams_test
       nccl_cuda_failure_test nccl_cuda_lifecycle_test nccl_cuda_p2p_test nccl_cuda_subgroup_test
       nccl_conformance_test)
PROGRAMS=("${TESTS[@]}" gpu_probe nccl_all_reduce_bandwidth)

# The core is named by its SONAME, libdistcomm.so.<major> (version.bzl).
CORE=libdistcomm.so.$(sed -n 's/^DISTCOMM_VERSION = "\([0-9]*\)\..*/\1/p' version.bzl)
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
echo "staged in $OUT/ ($(du -sh "$OUT" | cut -f1)): $(ls "$OUT/bin" | wc -l) programs, $(ls "$OUT/lib" | wc -l) libraries"
echo "on the GPU machine: tools/gpu_check.sh"
