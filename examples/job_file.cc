#include "examples/job_file.h"

#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>

#include <distcomm/api/init.h>

namespace distcomm {
namespace examples {

std::string user_path(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  const char* user_dir = std::getenv("BUILD_WORKING_DIRECTORY");
  const bool under_bazel_run = user_dir != nullptr && user_dir[0] != '\0';
  return (under_bazel_run ? std::string(user_dir) : std::filesystem::current_path().string()) + "/" + path;
}

std::string job_file(const std::string& stem, const std::string& extension) {
  std::string job = identity_from_environment().run_id;
  if (job.empty()) job = "pid" + std::to_string(::getpid());
  // A run id is the user's to choose across machines (and elastic ones start with
  // --rdzv_id): a '/' in it must not name a folder.
  for (char& c : job) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  }
  return user_path(stem + "." + job + "." + extension);
}

}  // namespace examples
}  // namespace distcomm
