"""A system library's compile and link flags, as the build found them, written into a file.

For the pkg-config and CMake files of an installed library built against a system library
(libdistcomm_torch against libtorch): a program that includes its headers needs the system
library's include folders and link flags too. They come from the repository rule that found
it (third_party/system_libs.bzl): its cc_library's linkopts (-L<dir>, -Wl,-rpath,<dir>,
-l<name>) and its include folders below external/<repository>/include, which link to the
library's own folders; each is written as the folder it resolves to (found when the file is
made, through one of its headers: info.bzl names the folder only where the library was
found, and a BUILD file cannot load a name that may be missing).
"""

def _library_flags_file_impl(ctx):
    cc = ctx.attr.lib[CcInfo]
    linked = "external/%s/include" % ctx.attr.lib.label.workspace_name
    contexts = cc.compilation_context
    include_dirs = []
    for d in contexts.system_includes.to_list() + contexts.includes.to_list():
        if (d == linked or d.startswith(linked + "/")) and d not in include_dirs:
            include_dirs.append(d)
    link_flags = []
    for linker_input in cc.linking_context.linker_inputs.to_list():
        if linker_input.owner == ctx.attr.lib.label:
            link_flags += linker_input.user_link_flags
    if not include_dirs or not link_flags:
        fail("%s: no include folders or link flags in %s" % (ctx.label, ctx.attr.lib.label))
    for flag in link_flags:
        if " " in flag or ";" in flag:
            fail("%s: '%s' has a space or ';', which the pkg-config and CMake files cannot carry" % (ctx.label, flag))

    # Per include folder, a header in a subfolder of it: the folder is what the header's real
    # path is with the header's path below the folder taken off.
    headers = contexts.headers.to_list()
    samples = []
    for d in include_dirs:
        sample = None
        for h in headers:
            if h.path.startswith(d + "/") and "/" in h.path[len(d) + 1:]:
                sample = h
                break
        if not sample:
            fail("%s: no header of %s below %s" % (ctx.label, ctx.attr.lib.label, d))
        samples.append(sample)

    var = ctx.attr.var
    placeholders = ["@@INCLUDE_DIR_%d@@" % i for i in range(len(include_dirs))]
    template = ctx.actions.declare_file(ctx.attr.name + ".template")
    ctx.actions.expand_template(
        template = ctx.file.src,
        output = template,
        substitutions = {
            "@%s_CFLAGS@" % var: " ".join(["-I" + p for p in placeholders]),
            "@%s_LIBS@" % var: " ".join(link_flags),
            "@%s_INCLUDE_DIRS@" % var: ";".join(placeholders),
            "@%s_LINK_FLAGS@" % var: ";".join(link_flags),
        },
    )
    args = ctx.actions.args()
    args.add(template)
    args.add(ctx.outputs.out)
    for i, d in enumerate(include_dirs):
        args.add(placeholders[i])
        args.add(samples[i])
        args.add(samples[i].path[len(d) + 1:])
    ctx.actions.run_shell(
        inputs = [template] + samples,
        outputs = [ctx.outputs.out],
        arguments = [args],
        mnemonic = "LibraryFlags",
        progress_message = "Writing %s with %s's folders" % (ctx.outputs.out.short_path, ctx.attr.lib.label),
        command = """
set -eu
template="$1" out="$2"
shift 2
cp "$template" "$out.tmp"
while [ $# -gt 0 ]; do
  placeholder="$1" header="$2" below="$3"
  shift 3
  real="$(readlink -f "$header")"
  dir="${real%/$below}"
  case "$dir" in
    "$real" | "" | *[\\ \\;\\|\\&]*)
      echo "cannot write the folder of $header ($real) into $out" >&2
      exit 1 ;;
  esac
  sed -i "s|$placeholder|$dir|g" "$out.tmp"
done
mv "$out.tmp" "$out"
""",
    )

# Copies `src` to `out` with @<var>_CFLAGS@ and @<var>_LIBS@ (pkg-config: "-I/usr/include
# -I...", "-L... -ltorch ...") and @<var>_INCLUDE_DIRS@ and @<var>_LINK_FLAGS@ (the same as
# CMake lists) filled in from `lib`, a third_party/system_libs.bzl library that was found.
library_flags_file = rule(
    implementation = _library_flags_file_impl,
    attrs = {
        "src": attr.label(allow_single_file = True, mandatory = True),
        "out": attr.output(mandatory = True),
        "lib": attr.label(mandatory = True, providers = [CcInfo]),
        "var": attr.string(mandatory = True),
    },
)
