// Error context: an error keeps its type while it gathers where it happened.
#include <gtest/gtest.h>

#include <stdexcept>

#include "api/errors.h"

namespace distcomm {
namespace {

template <typename E>
std::string thrown_as(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const E& x) {
    return x.what();
  } catch (...) {
    return "another type: " + message_of(std::current_exception());
  }
}

TEST(Errors, ContextGoesBeforeTheMessageOnceAndKeepsTheType) {
  const auto e = with_context(std::make_exception_ptr(Timeout("not finished")), "rank 1/4 group 'world' all_reduce #3");
  EXPECT_EQ(thrown_as<Timeout>(e), "rank 1/4 group 'world' all_reduce #3: not finished");
  // Through a second layer with the same context: not stacked twice.
  EXPECT_EQ(thrown_as<Timeout>(with_context(e, "rank 1/4 group 'world' all_reduce #3")),
            "rank 1/4 group 'world' all_reduce #3: not finished");
  EXPECT_EQ(thrown_as<PeerFailure>(with_context(std::make_exception_ptr(PeerFailure("closed")), "recv")),
            "recv: closed");
  // A type the core does not know becomes Error; an empty context changes nothing.
  EXPECT_EQ(thrown_as<Error>(with_context(std::make_exception_ptr(std::logic_error("bug")), "op")), "op: bug");
  EXPECT_EQ(thrown_as<Desync>(with_context(std::make_exception_ptr(Desync("x")), "")), "x");
  // A refusal stays a refusal (callers retry a StoreError, never a StoreRefused).
  EXPECT_EQ(thrown_as<StoreRefused>(with_context(std::make_exception_ptr(StoreRefused("wrong token")), "init")),
            "init: wrong token");
  EXPECT_EQ(with_context(nullptr, "op"), nullptr);
}

TEST(Errors, DetailGoesAfterTheMessage) {
  const auto e = with_detail(std::make_exception_ptr(InvalidArgument("bad root")), "rank 2 passed root 5");
  EXPECT_EQ(thrown_as<InvalidArgument>(e), "bad root; rank 2 passed root 5");
  EXPECT_EQ(thrown_as<Unsupported>(with_detail(std::make_exception_ptr(Unsupported("no op")), "")), "no op");
  EXPECT_EQ(message_of(nullptr), "");
  EXPECT_EQ(message_of(std::make_exception_ptr(42)), "unknown exception");
}

}  // namespace
}  // namespace distcomm
