// A test-only plugin whose available() probe says no, the way nccl does without a GPU, and
// the way every in-tree plugin built without its library does (the same macro).
#include "api/plugin/plugin.h"

DISTCOMM_DEFINE_UNAVAILABLE_PLUGIN("unavailable", "unavailable test plugin", DISTCOMM_DEVICE_CUDA, 0,
                                   "no test device: the probe is hard-wired to say no", nullptr)
