"""A library that //:install installs beside libdistcomm, built from its package's sources."""

load("//:version.bzl", "DISTCOMM_SONAME_VERSION")

def installed_library(name, srcs, public_hdrs, deps):
    """The targets of a library for tools/install/BUILD's INSTALLED list.

    public_header_files: the headers a program includes, as files (installed under
    include/distcomm/<package>/). lib<name>.so.<SONAME version>: the sources as one shared
    object; with //api:distcomm in deps it depends on libdistcomm (NEEDED), so a program
    links it with -l<name> alone, and finds it in its own folder (RUNPATH $ORIGIN).
    <name>_shared: the public headers and that shared object (through cc_import, as
    //api:distcomm wraps libdistcomm), for another installed library built on this one
    (integrations/torch's on ddp's): it NEEDs lib<name>.so.<SONAME version> instead of
    carrying a copy of these objects.

    Args:
      name: the library's name without "lib", e.g. "distcomm_ft".
      srcs: its sources and the headers it does not install.
      public_hdrs: the headers it installs.
      deps: what the sources need: //api:distcomm, another installed library's
        :<name>_shared (never the core's or that library's objects), system libraries.
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
        # $ORIGIN: installed, it finds the distcomm libraries it NEEDs beside it. A program's
        # own RUNPATH (-Wl,-rpath,<prefix>/lib) serves only the program's NEEDED entries, and
        # with --as-needed (the default of Debian's and Ubuntu's gcc) a program that calls
        # none of libdistcomm_ddp's functions itself does not NEED it: libdistcomm_torch
        # must find it.
        linkopts = [
            "-Wl,-soname," + soname,
            "-Wl,-rpath,$$ORIGIN",
        ],
        linkshared = 1,
        visibility = ["//tools/install:__pkg__"],
        deps = deps,
    )
    native.cc_import(
        name = name + "_shared_import",
        shared_library = ":" + soname,
    )
    native.cc_library(
        name = name + "_shared",
        hdrs = public_hdrs,
        # Installed libraries built on this one (never a program in the tree: one that also
        # linked the package's library target would have these objects twice).
        visibility = ["//integrations:__subpackages__"],
        deps = deps + [":" + name + "_shared_import"],
    )
