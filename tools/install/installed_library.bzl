"""A library that //:install installs beside libdistcomm, built from its package's sources."""

load("//:version.bzl", "DISTCOMM_SONAME_VERSION")

def installed_library(name, srcs, public_hdrs, deps):
    """The targets of a library for tools/install/BUILD's INSTALLED list.

    public_header_files: the headers a program includes, as files (installed under
    include/distcomm/<package>/). lib<name>.so.<SONAME version>: the sources as one shared
    object; with //api:distcomm in deps it depends on libdistcomm (NEEDED), so a program
    links it with -l<name> alone.

    Args:
      name: the library's name without "lib", e.g. "distcomm_ft".
      srcs: its sources and the headers it does not install.
      public_hdrs: the headers it installs.
      deps: what the sources need: //api:distcomm (never the core's objects).
    """
    native.filegroup(
        name = "public_header_files",
        srcs = public_hdrs,
        visibility = ["//tools/install:__pkg__"],
    )
    soname = "lib%s.so.%s" % (name, DISTCOMM_SONAME_VERSION)
    native.cc_binary(
        name = soname,
        srcs = srcs + public_hdrs,
        linkopts = ["-Wl,-soname," + soname],
        linkshared = 1,
        visibility = ["//tools/install:__pkg__"],
        deps = deps,
    )
