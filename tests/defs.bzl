"""Test macros: one gtest binary per file, linked against the shared core.

A test sees the core's internal headers too (//api:internal_headers): tests are the one
place outside api/ that may include them."""

def distcomm_test(name, srcs = None, deps = [], data = [], size = "small", **kwargs):
    native.cc_test(
        name = name,
        srcs = srcs or [name + ".cc"],
        size = size,
        data = data,
        deps = deps + [
            "//api:distcomm",
            "//api:internal_headers",
            "//tests/testing:gtest_main",
            "@system_gtest//:lib",
        ],
        **kwargs
    )
