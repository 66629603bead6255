// Where an example writes a file that the user opens after the job (average_gradients'
// model): in the folder the user ran the program from, where one looks for it, under a name
// of the job's own, because a fixed name (/tmp/distcomm_model.txt, say) is one file for
// every job on the host: two jobs at once overwrite each other's, and another user's job
// cannot write it at all. The program prints the path it wrote.
#pragma once

#include <string>

namespace distcomm {
namespace examples {

// `path` as the user meant it, made absolute: a relative path is in the folder the user
// started the program from. That is the working directory, except under `bazel run`,
// which starts the program in its runfiles and names the user's folder in
// $BUILD_WORKING_DIRECTORY.
std::string user_path(const std::string& path);

// user_path("<stem>.<job>.<extension>"). <job> is the job's run id ($DISTCOMM_RUN_ID), which
// tools/launch, spawn() and the self-launching examples make fresh for every job (and every
// restart), each character but letters, digits, '-' and '_' made '_'; without one
// (mpirun, srun) it is "pid<P>", the pid of the process that calls this, which no other
// running process on this host has. Call it on the one rank that writes the file.
std::string job_file(const std::string& stem, const std::string& extension);

}  // namespace examples
}  // namespace distcomm
