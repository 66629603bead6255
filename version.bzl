"""distcomm's one version number, and the rule that writes it into files.

Everything that states a version reads it from here: api/version.h (distcomm::version(),
the plugins' descriptors, the tools' --version and the bench header), the shared objects'
SONAMEs, the pkg-config and CMake files and the Debian package.
"""

DISTCOMM_VERSION = "0.2.0"

DISTCOMM_VERSION_MAJOR = DISTCOMM_VERSION.split(".")[0]

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
        },
    )

# Copies `src` to `out` with @DISTCOMM_VERSION@ (and _MAJOR@, _MINOR@, _PATCH@) filled in.
versioned_file = rule(
    implementation = _versioned_file_impl,
    attrs = {
        "src": attr.label(allow_single_file = True, mandatory = True),
        "out": attr.output(mandatory = True),
    },
)
