// A group of N ranks in one process: N ProcessGroups over the in_process test plugin
// (in_process_backend.cc), loaded through DISTCOMM_PLUGIN_PATH like any plugin. For
// testing the ProcessGroup's own logic at sizes above one, without processes.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "api/process_group.h"
#include "api/store/store.h"

namespace distcomm {
namespace testing {

struct InProcessOptions {
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
  // The group's backend spec: the plugin may serve several device types
  // ("cpu:in_process,cuda:in_process_cuda": device tensors that hold host memory).
  std::string backend = "in_process";
  // Backend settings; "in_process_ops" lists the ops the backend offers (default: all).
  std::map<std::string, std::string> config;
  DebugLevel debug = DebugLevel::kOff;
};

// Rank `rank`'s ProcessGroup of a world of n ranks meeting in `store` (a HashStore the
// ranks share): creation waits for every rank, so each rank calls it on a thread of its own.
ProcessGroupPtr in_process_rank(const StorePtr& store, int rank, int n, const InProcessOptions& options = {});

// Every rank's ProcessGroup of a new world of n ranks (created from this thread; the
// ranks attach to each other at their first op).
std::vector<ProcessGroupPtr> in_process_world(int n, const InProcessOptions& options = {});

// Runs fn(group) for every group on a thread of its own and joins them; an exception that
// escapes fn fails the test, naming the rank.
void on_every_rank(const std::vector<ProcessGroupPtr>& groups, const std::function<void(ProcessGroup&)>& fn);

}  // namespace testing
}  // namespace distcomm
