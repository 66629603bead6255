// Which rank this process is, for lines written outside any op: run_main's last line
// ("train: rank 1/4: <message>"), which under mpirun, with no launcher to prefix it, is
// otherwise the only place a user exception is reported from, with nothing to tell the ranks'
// lines apart.
#pragma once

#include <string>

namespace distcomm {

// "rank R/N" in the latest live group of this process that is no subgroup (the world; a
// fault-tolerant job's latest generation, smaller than the first after a loss); with none
// live, in the latest such group made, since a program's exception destroys its groups
// before run_main reports it; "" when none was.
std::string program_rank_text();

// message, led by program_rank_text() where the message does not already name that rank
// ("rank R/N" as every group's own errors begin).
std::string with_program_rank(const std::string& message);

}  // namespace distcomm
