// The mpi plugin's choice of Open MPI's nonblocking all_reduce algorithm (config
// iallreduce_algorithm), read back through the MPI tool interface after init. Run as
//   iallreduce_algorithm EXPECTED [USER_CHOICE]
// where USER_CHOICE, when given, is put in OMPI_MCA_coll_libnbc_iallreduce_algorithm before
// init (as a user would): it must win over the plugin's default.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "api/init.h"

#if __has_include(<mpi.h>)
#define OMPI_SKIP_MPICXX 1  // the C API only
#include <mpi.h>

int read_algorithm() {
  int provided = 0, index = -1, count = 0, value = -1;
  MPI_T_cvar_handle handle;
  MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided);
  if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index) == MPI_SUCCESS &&
      MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
    MPI_T_cvar_read(handle, &value);
    MPI_T_cvar_handle_free(&handle);
  }
  MPI_T_finalize();
  return value;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const int expected = std::atoi(argv[1]);
  if (argc > 2) ::setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", argv[2], 1);
  distcomm::InitOptions o;
  o.backend = "mpi";
  auto pg = distcomm::init_process_group(o);
  int level = -1;
  MPI_Query_thread(&level);
  const int got = read_algorithm();
  std::printf("rank %d: coll_libnbc_iallreduce_algorithm = %d, expected %d; thread level %d\n", pg->rank(), got,
              expected, level);
  pg->barrier()->wait();
  // Setting it must not change what MPI_Query_thread says (Open MPI's MPI_T_init_thread can).
  return got == expected && level == MPI_THREAD_MULTIPLE ? 0 : 1;
}
#else
int main() {
  std::printf("SKIPPED: built without Open MPI\n");
  return 0;
}
#endif
