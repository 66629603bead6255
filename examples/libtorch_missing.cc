// Stand-in for an example built without libtorch: says why and fails.
#include <cstdio>

#include "integrations/torch/missing_reason.h"

int main() {
  std::fprintf(stderr, "this example needs libtorch: %s\n", DISTCOMM_TORCH_MISSING_REASON);
  return 1;
}
