// Stand-in where Open MPI is not on this machine: says so (tools/setup.sh installs it).
#include <cstdio>

int main() {
  std::fprintf(stderr, "raw_mpi_collectives was built without Open MPI (run tools/setup.sh)\n");
  return 1;
}
