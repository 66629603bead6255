// Built only where the build did not find libtorch: says why integrations/torch is empty
// (a failure instead of a skip where DISTCOMM_REQUIRE lists torch, as CI does).
#include <gtest/gtest.h>

#include "integrations/torch/missing_reason.h"
#include "tests/testing/require.h"

TEST(Torch, SkippedWithoutLibtorch) { DISTCOMM_SKIP_WITHOUT("torch") << DISTCOMM_TORCH_MISSING_REASON; }
