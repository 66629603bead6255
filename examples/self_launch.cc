#include "examples/self_launch.h"

#include <gflags/gflags.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "launch/job.h"
#include "launch/launch_options.h"
#include "launch/tcp_job_store.h"

DEFINE_int32(nproc, 3, "ranks to start when no launcher started this program");
DEFINE_string(backend, "", "gloo, mpi, nccl, shm, auto... (default: $DISTCOMM_BACKEND, else auto)");

namespace distcomm {
namespace examples {
namespace {

int launch_copies(int argc, char** argv, int nproc, const std::string& backend,
                  const std::optional<FaultTolerantLaunch>& fault_tolerant);

// The running binary itself: argv[0] may be a bare name found through $PATH, or a path
// relative to a folder the ranks do not start in.
std::string this_binary() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) throw std::runtime_error("cannot read /proc/self/exe to re-run this program");
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace

void print_help_if_asked(int argc, char** argv) {
  std::string name = argc > 0 ? argv[0] : "example";
  name = name.substr(name.rfind('/') + 1);
  gflags::SetUsageMessage(name + " [flags]: a distcomm example");
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg != "--help" && arg != "-help" && arg != "-h") continue;
    // The example's own flags, not gflags' internals first (--helpfull lists those too).
    std::cout << name << ": a distcomm example. Run by hand, it starts --nproc copies of itself, each a rank;\n"
              << "under tools/launch, mpirun or srun it is one of the ranks.\n\nflags:\n";
    std::vector<gflags::CommandLineFlagInfo> flags;
    gflags::GetAllFlags(&flags);
    for (const auto& f : flags) {
      if (f.filename.find("gflags") != std::string::npos) continue;
      std::cout << "  --" << f.name << "=" << (f.type == "string" ? "\"" + f.default_value + "\"" : f.default_value)
                << "\n      " << f.description << "\n";
    }
    std::exit(0);
  }
}

InitOptions self_launch(int argc, char** argv, int default_nproc) {
  // Each example has its own default; set before parsing so that --help shows it.
  gflags::SetCommandLineOptionWithMode("nproc", std::to_string(default_nproc).c_str(), gflags::SET_FLAGS_DEFAULT);
  print_help_if_asked(argc, argv);
  // The original argv is what the copies get: keep the flags in it.
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/false);
  if (!launched_as_rank()) std::exit(launch_copies_of_self(argc, argv, FLAGS_nproc, FLAGS_backend));
  InitOptions init;
  init.backend = FLAGS_backend;
  return init;
}

int launch_copies_of_self(int argc, char** argv, int nproc, const std::string& backend) {
  return launch_copies(argc, argv, nproc, backend, std::nullopt);
}

int launch_copies_of_self(int argc, char** argv, int nproc, const std::string& backend,
                          const FaultTolerantLaunch& fault_tolerant) {
  return launch_copies(argc, argv, nproc, backend, fault_tolerant);
}

namespace {

int launch_copies(int argc, char** argv, int nproc, const std::string& backend,
                  const std::optional<FaultTolerantLaunch>& fault_tolerant) {
  std::string name = argc > 0 ? argv[0] : "example";
  name = name.substr(name.find_last_of('/') + 1);
  if (nproc < 1) {
    std::cerr << name << ": --nproc=" << nproc << ": must be at least 1\n";
    return 2;
  }
  launch::LaunchOptions options;
  options.command.assign(argv, argv + argc);
  options.nproc_per_node = nproc;
  options.backend = backend;
  options.identity = identity_from_environment();
  options.prefix_output = false;
  options.tag = name;
  if (fault_tolerant) {
    options.serve_store = launch::serve_tcp_job_store;
    options.on_failure = launch::LaunchOptions::OnFailure::kContinue;
    options.replace_after = std::chrono::milliseconds(static_cast<int64_t>(fault_tolerant->replace_after_s * 1000));
  }
  try {
    options.command[0] = this_binary();
    return launch::run_job(options).exit_code;
  } catch (const std::invalid_argument& e) {
    std::cerr << name << ": " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << name << ": cannot start the ranks: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

}  // namespace examples
}  // namespace distcomm
