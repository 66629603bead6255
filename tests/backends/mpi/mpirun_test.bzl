"""mpirun_test: runs a program under mpirun with np ranks (mpirun_test.sh).

The program is `program` (a label), or one built here from `srcs` against the core. The
mpi plugin always travels in the runfiles; `data` adds others (plugins a test also loads).
Built without Open MPI, the test prints SKIPPED with the reason the build found (or fails
where DISTCOMM_REQUIRE lists mpi).
"""

load("@system_mpi//:info.bzl", "FOUND", "REASON")

PLUGIN = "//backends/mpi:libdistcomm_mpi.so"

def mpirun_program(name, srcs, deps = []):
    """A program that mpirun_test runs on every rank, linked against the core."""
    native.cc_binary(
        name = name,
        testonly = 1,
        srcs = srcs,
        deps = ["//api:distcomm"] + deps,
    )

def mpirun_test(name, np, program = None, srcs = None, deps = [], args = [], expect_failure_within = None,
                expect_success_within = None, expect_output = None, size = "medium", data = [], **kwargs):
    if srcs:
        program = ":%s_program" % name
        mpirun_program(name = "%s_program" % name, srcs = srcs, deps = deps)
    if FOUND:
        expect = ["--expect-failure-within", str(expect_failure_within)] if expect_failure_within else []
        if expect_success_within:
            expect += ["--expect-success-within", str(expect_success_within)]
        # One text or a list of them; in double quotes (the texts quote group names in single ones).
        for text in ([expect_output] if type(expect_output) == "string" else (expect_output or [])):
            expect += ["--expect-output", "\"%s\"" % text]
        test_args = [str(np)] + expect + ["$(location %s)" % program] + args
    else:
        test_args = [str(np), "skip", "'%s'" % (REASON or "Open MPI was not found").replace("'", "")]
    native.sh_test(
        name = name,
        size = size,
        srcs = ["//tests/backends/mpi:mpirun_test.sh"],
        args = test_args,
        data = [program, PLUGIN, "//tests/testing:skip.sh"] + data,
        **kwargs
    )
