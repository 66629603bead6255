// Whether a shared object's file holds every byte its loadable segments name. dlopen maps
// the segments and touches them: a file cut short (a copy or an install that did not
// finish) kills the loading process with SIGBUS instead of failing, so the loader checks
// first and refuses such a file with a reason.
#pragma once

#include <string>

namespace distcomm {
namespace internal {

// "" when the file's PT_LOAD segments all lie within it, or when it is not a 64-bit ELF
// file (dlopen's own refusal says what it is); otherwise why it cannot be loaded, e.g.
// "the file is cut short: 5000 bytes, but its segments need 1052672 (a copy that did not
// finish? copy or install it again)".
std::string elf_cut_short(const std::string& path);

}  // namespace internal
}  // namespace distcomm
