// Which CPUs a group's ranks may run on, for the one decision it feeds: whether a waiting
// rank may spin (shm_engine.cc). Spinning pays only while every rank can have a core of
// its own; with fewer cores than ranks a spinning rank takes the core the awaited one needs.
//
// A rank's own affinity mask says nothing about that: ranks pinned one to a core each (one
// CPU in every mask) can all spin, and ranks all pinned to one core cannot. So each rank
// publishes its mask at rendezvous and the group counts the CPUs of their union.
#pragma once

#include <string>
#include <vector>

namespace distcomm {
namespace shm {

// The calling thread's affinity mask as a list of CPU numbers ("0,1,5"); empty when the
// system does not say.
std::string allowed_cpus_text();

// How many CPUs the union of masks (allowed_cpus_text() of each rank) holds; 0 when any
// mask is unknown.
int cpus_in_union(const std::vector<std::string>& masks);

// The CPUs the host has online (at least 1).
int online_cpus();

}  // namespace shm
}  // namespace distcomm
