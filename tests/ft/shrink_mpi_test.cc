// ProcessGroup::shrink on an mpi group is Unsupported, naming mpi and ULFM: MPI_COMM_WORLD
// cannot lose a rank without ULFM. A world of one (an MPI singleton, no mpirun needed) is
// enough: the refusal comes before anything is sent.
#include <gtest/gtest.h>

#include <string>

#include "api/errors.h"
#include "api/init.h"
#include "api/plugin/plugin_registry.h"
#include "tests/testing/require.h"

namespace distcomm {
namespace {

TEST(ShrinkMpi, IsUnsupportedNamingMpiAndUlfm) {
  const PluginInfo& info = load_plugin("mpi");
  if (!info.available) DISTCOMM_SKIP_WITHOUT("mpi") << "the mpi backend cannot run here: " << info.unavailable_reason;
  InitOptions o;
  o.backend = "mpi";
  ProcessGroupPtr pg = init_process_group(o);
  std::string what = "nothing";
  try {
    pg->shrink({});
  } catch (const Unsupported& e) {
    what = e.what();
  } catch (const std::exception& e) {
    what = std::string("not Unsupported: ") + e.what();
  }
  for (const char* part : {"backend 'mpi'", "ULFM", "--max_restarts"}) {
    EXPECT_NE(what.find(part), std::string::npos) << "should say '" << part << "': " << what;
  }
  // A bad list is still the caller's mistake first.
  EXPECT_THROW(pg->shrink({0}), InvalidArgument);
  // The group is unharmed.
  Tensor t = Tensor::of<float>({2.0f});
  pg->all_reduce(t)->wait();
  EXPECT_EQ(t.item(0), 2.0);
  destroy_process_group();
}

}  // namespace
}  // namespace distcomm
