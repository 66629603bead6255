// An install without the gloo plugin (built where gloo was missing) still runs a one-host job
// on the default backend: "auto" picks shm and needs no other plugin (found by a review: it
// failed with "cannot load backend 'gloo'" although gloo would not have been used). This
// test's runfiles carry the shm plugin alone.
#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/group/auto_backend.h"
#include "api/plugin/plugin_registry.h"
#include "api/process_group.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

TEST(AutoWithoutGloo, AOneHostJobRunsOnShmAlone) {
  ASSERT_THROW(load_plugin("gloo", PluginSearch{}), BackendUnavailable) << "this test must run without gloo";
  testing::run_group(2, "auto", [](ProcessGroup& pg) {
    EXPECT_EQ(pg.backend_name(), "auto (cpu: shm)");
    Tensor t = Tensor::of({static_cast<float>(pg.rank() + 1)});
    pg.all_reduce(t)->wait();
    EXPECT_EQ(t.item(), 3.0);
  });
}

}  // namespace
}  // namespace distcomm
