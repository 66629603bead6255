// What a rank can say of another rank of its group that does not answer, where that rank's
// process runs on this host: stopped, stopped by a debugger, ended (progress_report.h
// process_state_note). Each rank publishes where its process runs once on the group's board,
// under peer_process_key(rank): "<process_domain()>\n<pid> <start>" (auto_backend.h; start:
// field 22 of its /proc/<pid>/stat, clock ticks since boot), the domain gloo's process watch
// compares too; a reader of the same domain may look at that pid's /proc entry, and takes a
// process there that started at another time for what it is: another process, the rank's
// having ended (its pid reused). A value without the start (a core before it) is read too.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/store/store.h"

namespace distcomm {

std::string peer_process_key(int rank);

// A rank's process as published: pid 0 where it runs elsewhere (another domain) or nothing
// could be read; start 0 where the publisher did not say it.
struct PeerProcess {
  int pid = 0;
  unsigned long long start_ticks = 0;
};

// Publishes where this process runs under peer_process_key(rank) (one store call) and
// returns its domain; "" where it has none (a DISTCOMM_HOST_ID refused): then nothing is
// published and no other rank's process is looked at. Throws what the store throws.
std::string publish_this_process(Store& board, int rank);

// For each rank whose entry in `silent` is true: what /proc says of its process where it
// runs in `domain` ("" where nothing is known, or for a rank not silent). `pids` caches, per
// rank, its process where it runs in `domain`, else pid 0 (a published process never changes); the
// ranks not in it are read from `board` in one request (one not published yet is read again
// next time). No lock is held here: the caller passes its copy of the cache and keeps the
// one returned in it.
std::vector<std::string> silent_process_notes(Store& board, const std::vector<bool>& silent, const std::string& domain,
                                              std::map<int, PeerProcess>& pids);

}  // namespace distcomm
