#include "api/errors.h"
#include "api/errors_internal.h"

namespace distcomm {

// Out-of-line destructors anchor each type's vtable and typeinfo in libdistcomm.so, so a
// plugin that throws PeerFailure and the core that catches it agree on the type.
Error::~Error() = default;
InvalidArgument::~InvalidArgument() = default;
Timeout::~Timeout() = default;
PeerFailure::~PeerFailure() = default;
Desync::~Desync() = default;
AgreedDesync::~AgreedDesync() = default;
BackendUnavailable::~BackendUnavailable() = default;
StoreError::~StoreError() = default;
StoreRefused::~StoreRefused() = default;
Unsupported::~Unsupported() = default;

}  // namespace distcomm

namespace distcomm {

namespace {

// The same exception type with the message msg(e) makes; unknown types become Error.
template <typename Msg>
std::exception_ptr rebuilt(std::exception_ptr e, const Msg& msg, const std::string& unknown) {
  try {
    std::rethrow_exception(e);
  } catch (const InvalidArgument& x) {
    return std::make_exception_ptr(InvalidArgument(msg(x)));
  } catch (const Timeout& x) {
    return std::make_exception_ptr(Timeout(msg(x)));
  } catch (const PeerFailure& x) {
    return std::make_exception_ptr(PeerFailure(msg(x)));
  } catch (const AgreedDesync& x) {
    return std::make_exception_ptr(AgreedDesync(msg(x)));
  } catch (const Desync& x) {
    return std::make_exception_ptr(Desync(msg(x)));
  } catch (const BackendUnavailable& x) {
    return std::make_exception_ptr(BackendUnavailable(msg(x)));
  } catch (const StoreRefused& x) {
    return std::make_exception_ptr(StoreRefused(msg(x)));
  } catch (const StoreError& x) {
    return std::make_exception_ptr(StoreError(msg(x)));
  } catch (const Unsupported& x) {
    return std::make_exception_ptr(Unsupported(msg(x)));
  } catch (const std::exception& x) {
    return std::make_exception_ptr(Error(msg(x)));
  } catch (...) {
    return std::make_exception_ptr(Error(unknown));
  }
}

}  // namespace

std::exception_ptr with_context(std::exception_ptr e, const std::string& context) {
  if (!e || context.empty()) return e;
  auto msg = [&](const std::exception& x) {
    const std::string w = x.what();
    // Do not stack the same context twice when an error passes through two layers.
    return w.rfind(context, 0) == 0 ? w : context + ": " + w;
  };
  return rebuilt(e, msg, context + ": unknown exception");
}

std::exception_ptr with_detail(std::exception_ptr e, const std::string& detail) {
  if (!e || detail.empty()) return e;
  auto msg = [&](const std::exception& x) { return std::string(x.what()) + "; " + detail; };
  return rebuilt(e, msg, "unknown exception; " + detail);
}

std::exception_ptr with_line(std::exception_ptr e, const std::string& line) {
  if (!e || line.empty()) return e;
  auto msg = [&](const std::exception& x) {
    std::string m = x.what();
    if (!m.empty() && m.back() != '\n') m += '\n';
    return m + line;
  };
  return rebuilt(e, msg, "unknown exception\n" + line);
}

std::exception_ptr with_message(std::exception_ptr e, const std::string& message) {
  if (!e) return e;
  return rebuilt(e, [&](const std::exception&) { return message; }, message);
}

std::string message_of(std::exception_ptr e) {
  if (!e) return "";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}

}  // namespace distcomm
