// The core's own helpers on errors: not in a public header, so that no plugin calls them
// (a plugin may call only the core functions its ABI promises; see api/plugin/plugin.h).
#pragma once

#include <exception>
#include <string>

namespace distcomm {

// The same exception type with `line` on a line of its own after its message (a note after
// a message of several lines, which "; note" would glue to the last of them).
std::exception_ptr with_line(std::exception_ptr e, const std::string& line);

// The same exception type with `message` instead of its own (distcomm's types; any other
// becomes Error).
std::exception_ptr with_message(std::exception_ptr e, const std::string& message);

}  // namespace distcomm
