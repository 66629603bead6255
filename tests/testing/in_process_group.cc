#include "tests/testing/in_process_group.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "api/store/hash_store.h"
#include "tests/testing/test_files.h"

namespace distcomm {
namespace testing {
namespace {

// The loader searches DISTCOMM_PLUGIN_PATH first; the test's own plugin folders stay in it.
void add_plugin_folder(const std::string& dir) {
  const char* now = std::getenv("DISTCOMM_PLUGIN_PATH");
  const std::string path = now ? now : "";
  if ((path + ":").find(dir + ":") != std::string::npos) return;
  const std::string joined = path.empty() ? dir : dir + ":" + path;
  ::setenv("DISTCOMM_PLUGIN_PATH", joined.c_str(), 1);
}

}  // namespace

ProcessGroupPtr in_process_rank(const StorePtr& store, int rank, int n, const InProcessOptions& options) {
  add_plugin_folder(runfile("tests/testing"));
  ProcessGroupOptions o;
  o.store = store;
  o.rank = rank;
  o.size = n;
  o.backend = options.backend;
  o.timeout = options.timeout;
  o.backend_config = options.config;
  o.debug = options.debug;
  return ProcessGroup::create(o);
}

std::vector<ProcessGroupPtr> in_process_world(int n, const InProcessOptions& options) {
  auto store = std::make_shared<HashStore>();
  // Created at once, one thread each, as ranks are: creation waits for every rank to arrive.
  std::vector<ProcessGroupPtr> groups(static_cast<size_t>(n));
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        groups[static_cast<size_t>(r)] = in_process_rank(store, r, n, options);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    if (!errors[static_cast<size_t>(r)].empty()) {
      throw std::runtime_error("in_process_world: rank " + std::to_string(r) + ": " + errors[static_cast<size_t>(r)]);
    }
  }
  return groups;
}

void on_every_rank(const std::vector<ProcessGroupPtr>& groups, const std::function<void(ProcessGroup&)>& fn) {
  std::vector<std::string> errors(groups.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < groups.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(*groups[r]);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (size_t r = 0; r < groups.size(); ++r) {
    if (!errors[r].empty()) ADD_FAILURE() << "rank " << r << ": " << errors[r];
  }
}

}  // namespace testing
}  // namespace distcomm
