// The job's store that node 0's launcher serves (launch/tcp_job_store.h) hears of the keys
// it needs as they are created (TCPStoreServerOptions::on_created, for one key prefix): a
// fenced member, under ft/fenced/. The server copies the value of each key under that
// prefix for the call; the hook once asked for all of ft/ -- every generation's keys and
// whatever state a fault-tolerant job keeps in its store, copied for nothing. Here an ft/
// key outside ft/fenced/ costs the server no more than a key outside ft/: the big
// allocations while each is set are counted (the program's operator new), and must be the
// same.
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/group/auto_backend.h"
#include "api/process/fenced_member.h"
#include "api/store/tcp_store.h"
#include "launch/tcp_job_store.h"

namespace {

// Allocations of at least kBig bytes, in any thread of this program.
constexpr size_t kBig = size_t{4} << 20;
std::atomic<int> big_allocations{0};

void* counted(size_t n) {
  if (n >= kBig) big_allocations.fetch_add(1);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}

}  // namespace

void* operator new(size_t n) { return counted(n); }
void* operator new[](size_t n) { return counted(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace distcomm {
namespace launch {
namespace {

struct Served {
  Served() {
    JobStoreRequest r;
    r.host = "127.0.0.1";
    r.identity = new_job_identity();
    r.world_size = 1;
    store = serve_tcp_job_store(r);
    TCPStoreOptions o;
    o.host = "127.0.0.1";
    o.port = store->port();
    o.identity = r.identity;
    o.timeout = std::chrono::seconds(20);
    client = std::make_unique<TCPStore>(o);
  }
  // How many big allocations setting `key` to `value` took, the client's and the server's.
  int big_allocations_to_set(const std::string& key, const Store::Bytes& value) {
    const int before = big_allocations.load();
    client->set(key, value);  // answered once the server has stored it and told its hook
    return big_allocations.load() - before;
  }
  std::unique_ptr<JobStore> store;
  std::unique_ptr<TCPStore> client;
};

TEST(JobStoreHook, AnFtKeyThatIsNoFencingIsNotCopiedForTheLauncher) {
  Served s;
  const Store::Bytes value(size_t{8} << 20, 7);  // a member's state, say
  const int elsewhere = s.big_allocations_to_set("job/state/0", value);
  const int under_ft = s.big_allocations_to_set(std::string(local::kFtStoreRoot) + "/state/0", value);
  EXPECT_GT(elsewhere, 0) << "the count sees the request's own allocations";
  EXPECT_EQ(under_ft, elsewhere) << "an ft/ key was copied for the launcher's hook";
}

// What the hook is for still comes: a member fenced on this host.
TEST(JobStoreHook, AFencedMemberOfThisHostIsStillHeardOf) {
  Served s;
  local::FencedMember m;
  m.id = "rank1";
  m.domain = shared_memory_domain();
  m.pid = ::getpid();
  m.why = "its heartbeat stopped";
  s.client->set(local::fenced_key_prefix() + m.id, to_bytes(m.encode()));
  const std::vector<local::FencedMember> fenced = s.store->take_fenced();
  ASSERT_EQ(fenced.size(), 1u);
  EXPECT_EQ(fenced[0].id, "rank1");
  EXPECT_EQ(fenced[0].why, "its heartbeat stopped");
}

}  // namespace
}  // namespace launch
}  // namespace distcomm
