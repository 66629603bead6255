// Test-only plugins that throw where the loader calls into them, one way each (THROWS):
// create() throws a std::runtime_error, an int, or a distcomm Timeout; or the plugin's
// static initialisation throws, inside dlopen; or the new backend's supported_ops() throws
// (5), its name() is not the plugin's (6) or throws (7). The loader must name the backend and
// the file, keep the message, and keep a distcomm error's type. With THROWS 0 it throws nothing:
// a plugin of a built-in backend's name, for a folder in DISTCOMM_PLUGIN_PATH.
#include <stdexcept>

#include "api/errors.h"
#include "api/plugin/plugin.h"

namespace {

#if THROWS == 4
const int thrown_at_load = [] {
  throw std::runtime_error("static init of the test plugin");
  return 0;
}();
#endif

class Quiet : public distcomm::Backend {
 public:
  explicit Quiet(const distcomm::BackendOptions& o) : Backend(o) {}
  std::string name() const override {
#if THROWS == 6
    return "another_name";
#elif THROWS == 7
    throw std::runtime_error("name exploded");
#endif
    return PLUGIN_NAME;
  }
  std::vector<distcomm::OpType> supported_ops() const override {
#if THROWS == 5
    throw std::runtime_error("supported_ops exploded");
#endif
    return {};
  }
};

int available(std::string*) { return 1; }

distcomm::Backend* create(const distcomm::BackendOptions& o) {
#if THROWS == 1
  throw std::runtime_error("boom in the test plugin's ctor");
#elif THROWS == 2
  throw 42;
#elif THROWS == 3
  throw distcomm::Timeout("the test plugin's rendezvous timed out");
#endif
  return new Quiet(o);
}

}  // namespace

DISTCOMM_DEFINE_PLUGIN(PLUGIN_NAME, "throwing test plugin", DISTCOMM_DEVICE_CPU, 0, available, create)
