// run_main: the body of a program's main(), so that a failure ends it with one clear line.
//
//   int main(int argc, char** argv) {
//     return distcomm::run_main("all_reduce", [&] {
//       distcomm::ProcessGroupPtr pg = distcomm::init_process_group();
//       ...
//       return 0;
//     });
//   }
//
// An exception out of the body prints "all_reduce: <message>" on stderr and makes main
// return 1 -- no "terminate called", no SIGABRT, no core dump. Without a distcomm launcher
// (under mpirun, srun, by hand), a message that does not name this process's rank (a
// program's own exception) is led by it, "all_reduce: rank 1/4: <message>", from the latest
// group the program made that is no subgroup (the world, an ft generation). When the program runs under
// a launcher that names a file in DISTCOMM_ERROR_FILE (tools/launch does, one per rank),
// the error and its time also go there (api/process/failure_report.h), so that the launcher names
// the rank that failed first as the job's cause (torchrun's @record works the same way).
// Every live process group of the program publishes the error as the group's failure
// (ProcessGroup::publish_program_failure), so that the other ranks, cut off when this one
// exits, report it ("rank 0 of the group failed ... Its error: ...") rather than a closed
// connection; where rank 0 serves the store (no launcher does), it stays up a moment for
// them to read it.
//
// It also sets the last line of defence for an exception that escapes some other thread
// (a library's): the same line, then the process exits with status 1 at once.
#pragma once

#include <exception>
#include <functional>
#include <string>

namespace distcomm {

int run_main(const std::string& program, const std::function<int()>& body);

// "distcomm::Timeout: rank 0/3 group 'world' all_reduce #3: ...": an exception's type
// and message, as the failure reports carry them.
std::string type_and_message(std::exception_ptr e);

}  // namespace distcomm
