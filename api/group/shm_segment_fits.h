// The optional export of the shm plugin that "auto" asks (api/group/auto_backend.cc, through
// dlsym) whether a rank's segment for the group being created fits this process's file size
// limit (ulimit -f). Declared once here, for both sides: the core casts dlsym's answer to
// this type, and backends/shm/shm_plugin.cc checks its definition against it
// (static_assert), so that a change on one side fails to compile instead of calling a
// function through the wrong type. The core's own, shared with the shm plugin of this
// repository only (api/BUILD's SHM_SEGMENT_FITS_HEADERS): not a promise to other plugins.
#pragma once

#include <map>
#include <string>

namespace distcomm {

// 1 when a rank's segment of a group of `group_size` ranks with the shm settings of `config`
// (BackendOptions::config; nullptr: the defaults) fits this process's limits; 0 with *why
// (a sentence, without "shm: ") when it does not, or when the plugin could not judge it.
// Never throws.
using ShmSegmentFits = int(int group_size, const std::map<std::string, std::string>* config, std::string* why);

// The name the shm plugin exports it under (extern "C").
constexpr char kShmSegmentFitsSymbol[] = "distcomm_shm_segment_fits";

}  // namespace distcomm
