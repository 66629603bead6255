# Sourced by the measuring scripts (tools/bench, tools/ddp_bench, ...):
#   measure_build TARGET...   builds TARGETs with -c opt and sets $bin to that bazel-bin.
# Then it stops the Bazel server. An idle server is not idle: its JVM's threads wake every few
# milliseconds (~5% of a core here), and on a host with a core per rank each wake-up takes a
# measured rank's core: shm's 8 B all_reduce measured 7.5 us a call in some runs with the
# server up and 1.0-2.5 us with it stopped. The outputs stay where they are; the next bazel
# command starts a server again.
measure_build() {
  bazel build -c opt "$@" || return 1
  bin="$(bazel info -c opt bazel-bin)" && [[ -n "$bin" ]] || { echo "measure_build: bazel info found no bazel-bin" >&2; return 1; }
  bazel shutdown 2>/dev/null || true
}
