// internal::store_lost: what a rank's wait (group creation, the host exchange, init's phases)
// says when the store failed under it. Only a store that went away is blamed on the process
// that served it; a refusal and a connection this process cut off are said as what they are.
#include <gtest/gtest.h>

#include <exception>
#include <string>

#include "api/errors.h"
#include "api/store/internal/store_host.h"

namespace distcomm {
namespace {

template <typename E>
std::string raised_as(const std::exception_ptr& p) {
  try {
    std::rethrow_exception(p);
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("another type: ") + e.what();
  }
  return "";
}

TEST(StoreLost, AStoreThatWentAwayNamesTheProcessThatServedIt) {
  const StoreError closed("TCPStore: the server at 10.0.0.1:29500 closed the connection during GET");
  const std::string what =
      raised_as<PeerFailure>(internal::store_lost(closed, "init gave up waiting", "rank 0"));
  EXPECT_EQ(what, "init gave up waiting; rank 0 (which served the store) has exited or closed it");
}

// Another job's store answering on the port (its server restarted there), or a wrong token:
// a StoreRefused still, and nothing said of the old server's process.
TEST(StoreLost, ARefusalStaysARefusal) {
  const StoreRefused refused("TCPStore: the store at 10.0.0.1:29500 belongs to another job (run id b)");
  const std::string what = raised_as<StoreRefused>(internal::store_lost(refused, "init gave up waiting", "rank 0"));
  EXPECT_EQ(what, "init gave up waiting");
  EXPECT_EQ(what.find("has exited"), std::string::npos) << what;
}

// This process cut its own connection off (an ft member that took itself for lost): the
// store's process may be fine.
TEST(StoreLost, AConnectionCutOffHereIsNoExitOfTheStoresProcess) {
  const StoreError cut(std::string("TCPStore: this client's connection to 10.0.0.1:29500") + internal::kCutOffWords +
                       "ft member 'rank2' takes itself for lost");
  const std::string what = raised_as<StoreError>(internal::store_lost(cut, "creation failed", "the launcher"));
  EXPECT_EQ(what, "creation failed");
}

}  // namespace
}  // namespace distcomm
