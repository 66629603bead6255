// Built only where the build did not find libtorch: says why integrations/torch is empty.
#include <gtest/gtest.h>

#include "integrations/torch/missing_reason.h"

TEST(Torch, SkippedWithoutLibtorch) { GTEST_SKIP() << DISTCOMM_TORCH_MISSING_REASON; }
