#include "api/version.h"

namespace distcomm {

const char* version() { return DISTCOMM_VERSION; }

}  // namespace distcomm
