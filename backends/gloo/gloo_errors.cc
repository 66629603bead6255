#include "backends/gloo/gloo_errors.h"

#include <string>

#include <gloo/common/error.h>

#include "api/errors.h"

namespace distcomm {
namespace gloo {

std::exception_ptr to_distcomm_error(std::exception_ptr raw, std::chrono::milliseconds timeout) {
  try {
    std::rethrow_exception(raw);
  } catch (const Error&) {
    return raw;
  } catch (const ::gloo::IoException& e) {
    const std::string msg = e.what();
    if (msg.find("Timed out") != std::string::npos) {
      return std::make_exception_ptr(
          Timeout("timed out after " + std::to_string(timeout.count()) +
                  " ms waiting for peers: not every rank of the group joined this op in time, or one is "
                  "stuck (gloo: " + msg + ")"));
    }
    return std::make_exception_ptr(PeerFailure(
        "lost the connection to a peer: its process may have died or closed the group (gloo: " + msg + ")"));
  } catch (...) {
    return std::make_exception_ptr(Error("gloo failed: " + message_of(raw)));
  }
}

}  // namespace gloo
}  // namespace distcomm
