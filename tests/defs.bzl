"""Test macros: one gtest binary per file, linked against the shared core."""

def distcomm_test(name, srcs = None, deps = [], data = [], size = "small", **kwargs):
    native.cc_test(
        name = name,
        srcs = srcs or [name + ".cc"],
        size = size,
        data = data,
        deps = deps + [
            "//api:distcomm",
            "//tests/testing:gtest_main",
            "@system_gtest//:lib",
        ],
        **kwargs
    )
