"""distcomm's one version number, and the rule that writes it into files.

Everything that states a version reads it from here: api/version.h (distcomm::version(),
the plugins' descriptors, the tools' --version and the bench header), the shared objects'
SONAMEs, the pkg-config and CMake files and the Debian package.
"""

DISTCOMM_VERSION = "0.3.0"

DISTCOMM_VERSION_MAJOR = DISTCOMM_VERSION.split(".")[0]

# The version in the shared objects' SONAMEs (libdistcomm.so.<this>): the major from 1.0 on;
# while the major is 0, major.minor. A 0.x minor release may change the layout of a struct
# that programs compile in (0.3.0: ProcessGroupOptions grew a field), and a program built
# against another one must then fail to load, naming the library it needs, not run and
# crash. From 1.0 such a change takes a new major.
DISTCOMM_SONAME_VERSION = DISTCOMM_VERSION_MAJOR if DISTCOMM_VERSION_MAJOR != "0" else ".".join(DISTCOMM_VERSION.split(".")[:2])

def _versioned_file_impl(ctx):
    major, minor, patch = DISTCOMM_VERSION.split(".")
    ctx.actions.expand_template(
        template = ctx.file.src,
        output = ctx.outputs.out,
        substitutions = {
            "@DISTCOMM_VERSION@": DISTCOMM_VERSION,
            "@DISTCOMM_VERSION_MAJOR@": major,
            "@DISTCOMM_VERSION_MINOR@": minor,
            "@DISTCOMM_VERSION_PATCH@": patch,
            "@DISTCOMM_SONAME_VERSION@": DISTCOMM_SONAME_VERSION,
        },
    )

# Copies `src` to `out` with @DISTCOMM_VERSION@ (and _MAJOR@, _MINOR@, _PATCH@, and
# @DISTCOMM_SONAME_VERSION@) filled in.
versioned_file = rule(
    implementation = _versioned_file_impl,
    attrs = {
        "src": attr.label(allow_single_file = True, mandatory = True),
        "out": attr.output(mandatory = True),
    },
)
