// main() of the programs that need libtorch (examples, tools) where the build found none:
// it says why and fails.
#include <cstdio>

#include "integrations/torch/missing_reason.h"

int main() {
  std::fprintf(stderr, "this program needs libtorch: %s\n", DISTCOMM_TORCH_MISSING_REASON);
  return 1;
}
