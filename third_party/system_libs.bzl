"""Configure-style repository rules: find a system library, or fall back to a dummy.

Each found library becomes `@<name>//:lib`, a cc_library over symlinked headers and the
shared object. Each repository also has `info.bzl` with FOUND and REASON, so a BUILD file
can build a real target where the library exists and a dummy that explains itself where it
does not (e.g. a backend plugin whose available() probe returns REASON).

Paths can be overridden with environment variables (see _LIBS); the rules re-run when
they change.
"""

def _first_existing(ctx, candidates, relpath):
    for c in candidates:
        if c and ctx.path(c + "/" + relpath).exists:
            return c
    return None

def _define_value(text, macro):
    for line in text.split("\n"):
        words = [w for w in line.replace("\t", " ").split(" ") if w]
        if len(words) >= 3 and words[0] == "#define" and words[1] == macro:
            return words[2]
    return None

def _debian_package_version(ctx, path):
    """'libgtest-dev 1.12.1-0.2' for a file a Debian package installed, else None."""
    owner = ctx.execute(["dpkg-query", "-S", path])
    if owner.return_code != 0:
        return None
    package = owner.stdout.split("\n")[0].split(": ")[0].strip()
    version = ctx.execute(["dpkg-query", "-W", "-f=${Version}", package])
    if version.return_code != 0:
        return None
    return "%s %s" % (package.split(":")[0], version.stdout.strip())

# What `bazel run //tools:versions` and the bench header print for the library: its version
# macros (version_header, version_macros), and the Debian package that installed it.
def _library_version(ctx, inc):
    parts = []
    if ctx.attr.version_header and ctx.path(inc + "/" + ctx.attr.version_header).exists:
        text = ctx.read(inc + "/" + ctx.attr.version_header)
        numbers = [_define_value(text, m) for m in ctx.attr.version_macros]
        if numbers and None not in numbers:
            parts.append(".".join(numbers))
    package = _debian_package_version(ctx, inc + "/" + ctx.attr.probe_header)
    if package:
        parts.append("(Debian %s)" % package)
    return " ".join(parts) if parts else "version unknown"

def _system_library_impl(ctx):
    name = ctx.attr.name
    inc_candidates = []
    lib_candidates = []
    root = ctx.os.environ.get(ctx.attr.root_env, "") if ctx.attr.root_env else ""
    if root:
        inc_candidates.append(root + "/include")
        lib_candidates += [root + "/lib64", root + "/lib"]
    inc_candidates += ctx.attr.include_dirs
    lib_candidates += ctx.attr.lib_dirs

    inc = _first_existing(ctx, inc_candidates, ctx.attr.probe_header)
    missing = []
    if not inc:
        missing.append("header %s (looked in %s)" % (ctx.attr.probe_header, ", ".join(inc_candidates)))
    lib_dirs = {}
    link_names = []
    for lib in ctx.attr.libs:
        ver = ctx.attr.soversions.get(lib, "")
        found = None
        for fname, link in [
            ("lib%s.so" % lib, "-l" + lib),
            ("lib%s.a" % lib, "-l" + lib),
            # Some libraries ship only a versioned soname (libnccl.so.2) without the dev link.
            ("lib%s.so.%s" % (lib, ver), "-l:lib%s.so.%s" % (lib, ver)),
        ]:
            d = _first_existing(ctx, lib_candidates, fname)
            if d:
                found = (d, link)
                break
        if not found:
            missing.append("lib%s (looked in %s)" % (lib, ", ".join(lib_candidates)))
        else:
            lib_dirs[found[0]] = True
            link_names.append(found[1])

    if missing:
        reason = "%s not found on this machine: missing %s. Install it (tools/setup.sh)%s." % (
            ctx.attr.display,
            "; ".join(missing),
            (" or set " + ctx.attr.root_env) if ctx.attr.root_env else "",
        )
        ctx.file("info.bzl", "FOUND = False\nREASON = %r\nVERSION = 'not found'\n" % reason)
        ctx.file("BUILD", """package(default_visibility = ["//visibility:public"])
# Dummy: {reason}
cc_library(name = "lib")
""".format(reason = reason))
        return

    if ctx.attr.header_subdirs:
        # Link only the library's own folder: putting /usr/include itself on the include
        # path as -isystem breaks libstdc++'s #include_next.
        for sub in ctx.attr.header_subdirs:
            if ctx.path(inc + "/" + sub).exists:  # some installs lack an optional one
                ctx.symlink(inc + "/" + sub, "include/" + sub)
    else:
        ctx.symlink(inc, "include")
    linkopts = []
    for d in lib_dirs.keys():
        linkopts += ["-L" + d, "-Wl,-rpath," + d]
    linkopts += link_names
    linkopts += ctx.attr.extra_linkopts
    ctx.file("info.bzl", "FOUND = True\nREASON = ''\nINCLUDE_DIR = %r\nVERSION = %r\n" % (inc, _library_version(ctx, inc)))
    ctx.file("BUILD", """package(default_visibility = ["//visibility:public"])
# Found: headers in {inc}
cc_library(
    name = "lib",
    hdrs = glob(["include/{hdr_glob}"], allow_empty = True),
    includes = ["include"] + {extra_includes},
    linkopts = {linkopts},
)
""".format(
        inc = inc,
        hdr_glob = ctx.attr.header_glob,
        extra_includes = repr(["include/" + x for x in ctx.attr.extra_include_subdirs]),
        linkopts = repr(linkopts),
    ))

system_library = repository_rule(
    implementation = _system_library_impl,
    local = True,
    attrs = {
        "display": attr.string(),
        "root_env": attr.string(),
        "include_dirs": attr.string_list(),
        "lib_dirs": attr.string_list(),
        "probe_header": attr.string(),
        "header_glob": attr.string(default = "**"),
        "header_subdirs": attr.string_list(),
        "extra_include_subdirs": attr.string_list(),
        "libs": attr.string_list(),
        "soversions": attr.string_dict(),
        "extra_linkopts": attr.string_list(),
        "version_header": attr.string(),
        "version_macros": attr.string_list(),
    },
    environ = ["GLOO_ROOT", "MPI_ROOT", "CUDA_ROOT", "NCCL_ROOT", "GFLAGS_ROOT", "GTEST_ROOT", "TORCH_ROOT"],
)

def system_libraries():
    """Declares every system library distcomm can use."""
    build_tools(name = "distcomm_build_tools", bazel_version = native.bazel_version)
    system_library(
        name = "system_gloo",
        display = "Gloo (libgloo-dev)",
        root_env = "GLOO_ROOT",
        include_dirs = ["/usr/include", "/usr/local/include"],
        lib_dirs = ["/usr/lib", "/usr/lib/x86_64-linux-gnu", "/usr/local/lib"],
        probe_header = "gloo/allreduce.h",
        header_glob = "gloo/**",
        header_subdirs = ["gloo"],
        libs = ["gloo"],
        version_header = "gloo/config.h",
        version_macros = ["GLOO_VERSION_MAJOR", "GLOO_VERSION_MINOR", "GLOO_VERSION_PATCH"],
    )
    system_library(
        name = "system_mpi",
        display = "Open MPI (libopenmpi-dev)",
        root_env = "MPI_ROOT",
        include_dirs = ["/usr/lib/x86_64-linux-gnu/openmpi/include", "/usr/include/openmpi", "/usr/local/include"],
        lib_dirs = ["/usr/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu/openmpi/lib", "/usr/local/lib"],
        probe_header = "mpi.h",
        extra_include_subdirs = ["openmpi"],
        libs = ["mpi"],
        version_header = "mpi.h",
        version_macros = ["OMPI_MAJOR_VERSION", "OMPI_MINOR_VERSION", "OMPI_RELEASE_VERSION"],
    )
    system_library(
        name = "system_cuda",
        display = "CUDA toolkit (cudart)",
        root_env = "CUDA_ROOT",
        include_dirs = ["/usr/local/cuda/include"],
        lib_dirs = ["/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"],
        probe_header = "cuda_runtime_api.h",
        libs = ["cudart"],
        soversions = {"cudart": "13"},
        version_header = "cuda_runtime_api.h",
        version_macros = ["CUDART_VERSION"],
    )
    system_library(
        name = "system_nccl",
        display = "NCCL",
        root_env = "NCCL_ROOT",
        include_dirs = ["/usr/local/cuda/include", "/usr/include"],
        lib_dirs = ["/usr/local/cuda/lib64", "/usr/lib/x86_64-linux-gnu"],
        probe_header = "nccl.h",
        header_glob = "nccl*.h",
        libs = ["nccl"],
        soversions = {"nccl": "2"},
        version_header = "nccl.h",
        version_macros = ["NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH"],
    )
    system_library(
        name = "system_gflags",
        display = "gflags (libgflags-dev)",
        root_env = "GFLAGS_ROOT",
        include_dirs = ["/usr/include", "/usr/local/include"],
        lib_dirs = ["/usr/lib/x86_64-linux-gnu", "/usr/local/lib"],
        probe_header = "gflags/gflags.h",
        header_glob = "gflags/**",
        header_subdirs = ["gflags"],
        libs = ["gflags"],
    )
    system_library(
        name = "system_gtest",
        display = "GoogleTest (libgtest-dev)",
        root_env = "GTEST_ROOT",
        include_dirs = ["/usr/include", "/usr/local/include"],
        lib_dirs = ["/usr/lib/x86_64-linux-gnu", "/usr/local/lib"],
        probe_header = "gtest/gtest.h",
        header_glob = "g*/**",
        header_subdirs = ["gtest", "gmock"],
        libs = ["gtest"],
        extra_linkopts = ["-lpthread"],
    )
    system_library(
        # PyTorch's C++ library, for integrations/torch (Debian's libtorch-dev, CPU only;
        # TORCH_ROOT may name an unpacked libtorch or a wheel's torch/ folder, whose
        # include/ and lib/ have the same layout).
        name = "system_torch",
        display = "libtorch (libtorch-dev)",
        root_env = "TORCH_ROOT",
        include_dirs = ["/usr/include", "/usr/local/include"],
        lib_dirs = ["/usr/lib/x86_64-linux-gnu", "/usr/local/lib"],
        probe_header = "torch/csrc/api/include/torch/version.h",
        header_subdirs = ["ATen", "c10", "caffe2", "torch"],
        extra_include_subdirs = ["torch/csrc/api/include"],
        libs = ["torch", "torch_cpu", "c10"],
        version_header = "torch/csrc/api/include/torch/version.h",
        version_macros = ["TORCH_VERSION_MAJOR", "TORCH_VERSION_MINOR", "TORCH_VERSION_PATCH"],
    )

def _build_tools_impl(ctx):
    version = ctx.attr.bazel_version
    if not version:
        # Debian's bazel-bootstrap is built without a release stamp: ask dpkg.
        package = ctx.execute(["dpkg-query", "-W", "-f=${Version}", "bazel-bootstrap"])
        version = "(Debian bazel-bootstrap %s)" % package.stdout.strip() if package.return_code == 0 else "unknown"
    ctx.file("BUILD", "")
    ctx.file("info.bzl", "BAZEL_VERSION = %r\n" % version)

# The Bazel that runs the build, for the versions report (//tools:versions).
build_tools = repository_rule(
    implementation = _build_tools_impl,
    local = True,
    attrs = {"bazel_version": attr.string()},
)
