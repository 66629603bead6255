// resolve_by (api/plugin/name_resolution.h) in a plugin loaded by a core older than ABI 1.8,
// which has no distcomm_resolve: the weak reference is then null and resolve_by falls back
// to a plain getaddrinfo. This binary stands for that core: it does not link libdistcomm at
// all (a plain cc_test, not distcomm_test), so the reference stays unresolved, as it would in
// such a process.
#include "api/plugin/name_resolution.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <chrono>
#include <string>

#include <gtest/gtest.h>

namespace distcomm {
namespace {

std::chrono::steady_clock::time_point soon() { return std::chrono::steady_clock::now() + std::chrono::seconds(5); }

std::string ipv4_of(const distcomm_address& a) {
  if (a.address.ss_family != AF_INET) return "";
  char text[INET_ADDRSTRLEN] = {};
  const auto* in = reinterpret_cast<const sockaddr_in*>(&a.address);
  return ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) ? text : "";
}

TEST(ResolveByWithoutTheCoresLookup, TheWeakReferenceIsUnresolvedHere) {
  // Else the cases below would test the core's lookup, not the fallback.
  EXPECT_EQ(&distcomm_resolve, nullptr);
}

TEST(ResolveByWithoutTheCoresLookup, FindsANumericAddressAndItsPort) {
  const Resolved r = resolve_by("127.0.0.1", "29500", AF_INET, SOCK_STREAM, soon());
  ASSERT_EQ(r.addresses.size(), 1u) << r.error;
  EXPECT_EQ(ipv4_of(r.addresses[0]), "127.0.0.1");
  EXPECT_EQ(ntohs(reinterpret_cast<const sockaddr_in*>(&r.addresses[0].address)->sin_port), 29500);
  EXPECT_EQ(r.addresses[0].length, sizeof(sockaddr_in));
  EXPECT_TRUE(r.error.empty());
  EXPECT_FALSE(r.timed_out);
}

TEST(ResolveByWithoutTheCoresLookup, AnEmptyHostIsTheLoopbackAsInTheCore) {
  const Resolved r = resolve_by("", "9", AF_INET, SOCK_DGRAM, soon());
  ASSERT_FALSE(r.addresses.empty()) << r.error;
  EXPECT_EQ(ipv4_of(r.addresses[0]), "127.0.0.1");
}

TEST(ResolveByWithoutTheCoresLookup, AFailedLookupSaysWhyAndIsNoTimeout) {
  // A service that /etc/services does not name: getaddrinfo refuses it without asking any
  // DNS server (a name that does not exist would wait on this machine's resolver).
  const Resolved r = resolve_by("127.0.0.1", "distcomm-no-such-service", AF_INET, SOCK_STREAM, soon());
  EXPECT_TRUE(r.addresses.empty());
  EXPECT_NE(r.error.find("ervname"), std::string::npos) << r.error;  // gai_strerror(EAI_SERVICE)
  EXPECT_FALSE(r.timed_out);
}

}  // namespace
}  // namespace distcomm
