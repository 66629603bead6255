// mkdir -p, for the two places that make a trace folder: the launcher's --trace_dir before
// any rank starts (launch/trace_folder.cc), and a rank's dump into a DISTCOMM_TRACE_DIR that
// nobody made (api/diagnostics/trace_dump.cc, a rank started without the launcher).
// Header-only: the launcher links no core library.
#pragma once

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace distcomm {

// Makes dir with every missing parent (mode 0755). Returns "" when dir is a folder at the
// end (made now, already there, or made meanwhile by another process), else why not, naming
// the level that could not be made: "cannot create /a/b: Permission denied", or "cannot
// create /a/b: it is not a folder" where a file is in the way. Repeated slashes and a
// trailing one are fine ("a//b/").
inline std::string make_folders(const std::string& dir) {
  for (size_t end = 1; end <= dir.size(); ++end) {
    if (end != dir.size() && dir[end] != '/') continue;
    if (dir[end - 1] == '/') continue;  // "a//b": that level was made already
    const std::string level = dir.substr(0, end);
    if (::mkdir(level.c_str(), 0755) == 0) continue;
    const int e = errno;
    struct stat st;
    // EEXIST for a file too (mkdir says nothing more), and EACCES or EROFS for a level that
    // exists where no folder may be made (/ itself): only what stat sees counts.
    if (::stat(level.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;
    return "cannot create " + level + ": " + (e == EEXIST ? std::string("it is not a folder") : std::strerror(e));
  }
  return "";
}

}  // namespace distcomm
