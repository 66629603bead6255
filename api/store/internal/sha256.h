// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for the store's challenge-response.
//
// Written here rather than taken from OpenSSL: the store must authenticate on every
// machine the core builds on, and 150 lines with the RFCs' test vectors
// (tests/api/store/sha256_test.cc) cost less than a system dependency with a fallback.
// Not for bulk data: it hashes a few hundred bytes per connection.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace distcomm {
namespace internal {

using Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  void update(const std::string& s) { update(s.data(), s.size()); }
  // The digest of everything updated so far. The object is spent afterwards.
  Digest finish();

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> block_{};
  size_t block_used_ = 0;
  uint64_t total_bytes_ = 0;
};

Digest sha256(const std::string& data);

// HMAC-SHA256 of message under key (any length: longer keys are hashed first).
Digest hmac_sha256(const std::string& key, const std::string& message);

// Compares in time that depends on the length only, never on where the bytes differ, so
// that a client cannot learn a proof byte by byte from how fast it is refused.
bool equal_in_constant_time(const uint8_t* a, const uint8_t* b, size_t n);

}  // namespace internal
}  // namespace distcomm
