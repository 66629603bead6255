// auto's placement judged for the group being created (its shm level's size and its
// settings), and how many ranks that level is judged for. The core's own (not in
// PUBLIC_HEADERS): auto_backend_placement (auto_backend.h) is part of the plugin ABI, and a
// parameter added to it changes its mangled name, so that a plugin or program built against
// the earlier header no longer loads ("undefined symbol"); this entry point carries the
// size instead, and group_creation.cc calls it.
#pragma once

#include <map>
#include <string>

#include "api/group/process_environment.h"

namespace distcomm {

// auto_backend_placement (auto_backend.h), where shm is judged for a rank's segment of a
// group of `shm_group_size` ranks with the settings `shm_config` (a segment grows with its
// group and must fit this process's file size limit, ulimit -f: the shm plugin's answer,
// shm_segment_fits.h); 0 judges a group of two with the default settings, as
// auto_backend_placement does.
std::string auto_backend_placement_for_group(const PluginSearch& plugins, const std::string& host_id, bool ask_nccl,
                                             bool ask_mpi, const std::string& hier_across, int shm_group_size,
                                             const std::map<std::string, std::string>& shm_config);

// How many ranks this rank's shm segment is judged for when a group of `group_size` ranks
// with backend `backend` ("auto" or "hier") is created, before the exchange says where the
// ranks are. Across hosts the group becomes the hierarchy, whose shm level holds only this
// host's ranks: judging the whole group dropped shm on every rank under a limit between
// the two sizes, and the job ran flat on gloo. So where the launcher said how many ranks run
// on this host (`local_world_size`, the backend setting init fills from LOCAL_WORLD_SIZE and
// its kin: environment.cc), the smaller of that and the group size (a group holds at most
// that many of this host's ranks); else, for "auto", the group size (it may be one host's
// group, all of it shm), and for "hier" 0: a group of two, its smallest shm level.
// local_world_size <= 0: not known.
int shm_ranks_to_judge(const std::string& backend, int group_size, int local_world_size);

}  // namespace distcomm
