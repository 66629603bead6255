// A program from outside distcomm's repository, built against an installed distcomm (once
// with CMake's find_package, once with pkg-config; see install_test.sh). It runs the
// torch.distributed tutorial's all_reduce (ranks 0, 1, 2 start with 1, 2, -3) and, with
// --ddp, averages one gradient through DistributedDataParallel.
#include <distcomm/api/init.h>
#include <distcomm/api/logging.h>
#include <distcomm/api/version.h>
#include <distcomm/ddp/distributed_data_parallel.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

// The backend plugin this process loaded, from its memory map: the plugin file the loader
// found, whatever told it where to look.
std::string loaded_plugin_path() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    const size_t slash = line.find('/');
    if (slash != std::string::npos && line.find("/libdistcomm_", slash) != std::string::npos &&
        line.find("libdistcomm_ddp") == std::string::npos) {
      return line.substr(slash);
    }
  }
  return "(no plugin mapped)";
}

int main(int argc, char** argv) {
  const bool with_ddp = argc > 1 && std::strcmp(argv[1], "--ddp") == 0;
  distcomm::ProcessGroupPtr pg = distcomm::init_process_group();
  if (pg->rank() == 0) {
    // Which distcomm runs, and where the loader found the backend.
    std::cout << "distcomm " << distcomm::version() << " (headers " << DISTCOMM_VERSION << "), backend "
              << pg->backend_name() << " from " << loaded_plugin_path() << std::endl;
  }

  const float start_values[] = {1, 2, -3};
  distcomm::Tensor x = distcomm::Tensor::of({pg->rank() < 3 ? start_values[pg->rank()] : 0.0f});
  pg->all_reduce(x)->wait();
  std::ostringstream line;
  line << "Rank " << pg->rank() << " has " << x.item();
  distcomm::ordered_print(*pg, line.str(), /*prefix=*/false);

  if (with_ddp) {
    distcomm::Tensor w = distcomm::Tensor::of({1.0f});
    distcomm::Tensor g = distcomm::Tensor::of({static_cast<float>(pg->rank() + 1)});
    distcomm::ddp::DistributedDataParallel ddp(*pg, {{"w", &w, &g}});
    ddp.mark_grad_ready(0);
    ddp.finish_backward();
    std::ostringstream averaged;
    averaged << "Rank " << pg->rank() << " averaged gradient " << g.item();
    distcomm::ordered_print(*pg, averaged.str(), /*prefix=*/false);
  }
  return 0;
}
