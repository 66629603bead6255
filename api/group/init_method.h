// An init_method's own settings, as torch.distributed takes them: rank and world size in its
// query ("tcp://10.0.0.1:29500?rank=0&world_size=2", also file:// and env://), and a '/'
// after tcp://'s port.
#pragma once

#include <string>

namespace distcomm {

struct InitMethodParts {
  std::string method;   // without the query (and tcp://'s trailing '/')
  int rank = -1;        // -1: the query does not say
  int world_size = -1;  // -1: the query does not say
};

// Throws InvalidArgument naming the init_method for a setting other than rank and
// world_size, or a value that is not a number (rank from 0, world_size from 1).
InitMethodParts split_init_method(const std::string& init_method);

// The rank (or world size, by `what`) the job runs with: the program's (InitOptions, -1 when
// unset), else the query's, else the environment's; -1 when none says. The query wins over
// the environment, as in torch (workers that a launched process forks, each with its rank in
// the query, inherit the launcher's RANK); a query that disagrees with InitOptions is an
// InvalidArgument naming both. torch's use_libuv setting is taken and means nothing here.
int agreed_value(const std::string& what, int from_program, int from_query, int from_environment,
                 const std::string& init_method);

}  // namespace distcomm
