// A DNS server of the test's own, for code that looks names up (name_lookup.h and its
// callers): in a forked child, new mount and network namespaces (root) whose
// /etc/resolv.conf (a bind mount over it) names one nameserver, the namespace's own
// 127.0.0.1:53, with "options timeout:10 attempts:1", so that one getaddrinfo of a name
// takes 10 s or more when that server is silent. Nothing leaves the child's network
// namespace; the machine's own resolv.conf is untouched (the mount is private).
//
// Each function fails the calling gtest (ASSERT) when a step fails: check
// ::testing::Test::HasFatalFailure() after it.
#pragma once

#include <chrono>
#include <string>

#include <gtest/gtest.h>

namespace distcomm {
namespace testing {

// Whether this process may make mount, network and UTS namespaces (a forked child tries).
bool can_make_private_dns();

// In this (forked) process: the namespaces and resolv.conf above (written into dir), with
// nothing serving 127.0.0.1:53 yet.
void enter_namespaces(const std::string& dir);

// As enter_namespaces, with a DNS server that never answers: sockets on 127.0.0.1:53 that
// read nothing, open for the process's life.
void enter_namespaces_with_a_silent_dns_server(const std::string& dir);

// After enter_namespaces: this process's host name becomes `name` (a UTS namespace of its
// own), and /etc/hosts (a bind mount over it, like resolv.conf's) holds only localhost's
// lines and `hosts_lines` (e.g. "10.99.0.1 box.distcomm-test\n"; "" for none: then the
// name is the DNS server's to answer).
void take_host_name(const std::string& dir, const std::string& name, const std::string& hosts_lines);

// After enter_namespaces: a DNS server on 127.0.0.1:53 that answers each query after
// `delay` (127.0.0.1 for an A query, no address for any other), on a thread of its own for
// the process's life; with answers >= 0, only the first `answers` queries, then none.
void serve_slow_dns(std::chrono::milliseconds delay, int answers = -1);

// A test that needs these: skipped with the reason where namespaces cannot be made (failed
// instead where DISTCOMM_REQUIRE lists netns); dir() is a temporary folder of its own, for
// enter_namespaces.
class PrivateDnsTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace testing
}  // namespace distcomm
