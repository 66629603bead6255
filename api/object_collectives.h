// torch.distributed's object collectives (all_gather_object, broadcast_object_list,
// gather_object, scatter_object_list) for C++: an "object" is a byte string the program
// serialises as it likes (a config, a file name, a JSON text, a protobuf), of any length,
// different on each rank, empty allowed.
//
//   std::vector<std::string> hosts = all_gather_object(*pg, my_host_name);
//   std::string run_id = pg->rank() == 0 ? new_run_id() : "";
//   broadcast_object(*pg, run_id);                  // every rank now has rank 0's
//
// Each is blocking and collective over the group (every rank calls it, in the same order as
// the group's other ops), and made of the group's own ops, so it runs on every backend with
// a CPU path and fails as they do: a rank that gives another src or never comes is a Desync
// or a Timeout naming it. Two ops each: the lengths first, then the bytes, every rank's
// padded to the longest (so one rank's long object costs every rank that length, as in
// torch); when every object is empty, the second op is left out, on every rank alike.
//
// timeout: each of the two ops' (kUseDefault: the group's), so a call may take up to twice
// it before it fails.
//
// An argument that only one rank can check (scatter_object's list, on src) still reaches the
// others: src sends the lengths anyway, marked, and every rank throws the same
// InvalidArgument naming src, instead of waiting for bytes that will not come.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "api/process_group.h"
#include "api/timeouts.h"

namespace distcomm {

// Every rank's object, in rank order.
std::vector<std::string> all_gather_object(ProcessGroup& pg, const std::string& object,
                                           std::chrono::milliseconds timeout = kUseDefault);

// src's object, into `object` on every rank (src's is left as it is).
void broadcast_object(ProcessGroup& pg, std::string& object, int src = 0,
                      std::chrono::milliseconds timeout = kUseDefault);

// Every rank's object, in rank order, on dst; an empty vector on the other ranks.
std::vector<std::string> gather_object(ProcessGroup& pg, const std::string& object, int dst = 0,
                                       std::chrono::milliseconds timeout = kUseDefault);

// objects[r] (read on src only: size() of them) to rank r; what this rank got.
std::string scatter_object(ProcessGroup& pg, const std::vector<std::string>& objects, int src = 0,
                           std::chrono::milliseconds timeout = kUseDefault);

}  // namespace distcomm
