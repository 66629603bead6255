// A destroyed group names only the ops its backends' shutdown cut off, not those the
// shutdown let end (the nccl backend's drain lets the GPU finish what a returned wait()
// left on a stream: naming those as lost was a false warning, seen on a real GPU). The
// drain_at_shutdown test plugin drains its all_reduces and cuts its barriers off.
#include <string>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/process_group.h"
#include "api/store/hash_store.h"
#include "tests/api/plugin_test_env.h"
#include "tests/testing/captured_stderr.h"

namespace distcomm {
namespace {

TEST(OpsDrainedAtShutdown, ADestroyedGroupNamesOnlyTheOpsItsShutdownCutOff) {
  use_test_plugins();
  ProcessGroupOptions o;
  o.store = std::make_shared<HashStore>();
  o.backend = "drain_at_shutdown";
  o.environment = ProcessEnvironment::read();
  o.environment->trace.buffer = 16;  // the warning needs the recorder, whatever the environment says
  ProcessGroupPtr pg = ProcessGroup::create(o);

  Tensor t = Tensor::zeros({4});
  WorkPtr drained = pg->all_reduce(t);  // all_reduce #0
  WorkPtr cut = pg->barrier();          // barrier #1
  ASSERT_FALSE(drained->is_completed());
  ASSERT_FALSE(cut->is_completed());

  testing::CapturedStderr captured;
  pg.reset();
  const std::string err = captured.text();

  // The plugin did what the test relies on.
  ASSERT_TRUE(drained->is_success());
  ASSERT_TRUE(cut->is_completed());
  EXPECT_THROW(cut->wait(), PeerFailure);

  EXPECT_NE(err.find("distcomm: group 'world' destroyed with 1 op not finished (barrier #1): they end with a "
                     "PeerFailure"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("all_reduce #0"), std::string::npos) << "an op the shutdown let end was named:\n" << err;
}

}  // namespace
}  // namespace distcomm
