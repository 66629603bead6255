"""Writes the versions of the libraries the build found into a C++ include file."""

def _library_versions_impl(ctx):
    rows = "".join(["{%s, %s},\n" % (repr(name), repr(version)) for name, version in ctx.attr.versions.items()])
    ctx.actions.write(ctx.outputs.out, "// Written by the build (tools/versions/BUILD).\n" + rows)

# `versions`: {"gloo": "0.5.0 (Debian libgloo-dev ...)", ...} in the order to print them.
library_versions = rule(
    implementation = _library_versions_impl,
    attrs = {
        "versions": attr.string_dict(),
        "out": attr.output(mandatory = True),
    },
)
