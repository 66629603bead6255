// A job's identity: the run id that names it and the secret (the store token) that its
// ranks prove to rank 0's TCPStore. Launchers make one per job (tools/launch, spawn(), the
// self-launching examples) and pass it to every rank in two environment variables, which
// init_process_group reads (identity_from_environment(), init.h). See docs/security.md.
//
// Header-only, so that the launcher, which does not link the core, makes identities the
// same way.
#pragma once

#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace distcomm {

struct JobIdentity {
  // Names the job in keys and error messages. Not secret.
  std::string run_id;
  // The store secret. Never logged, never put on a command line (other users can read
  // those); it travels in the environment, which only the same user can read.
  std::string token;
};

constexpr char kRunIdVariable[] = "DISTCOMM_RUN_ID";
constexpr char kStoreTokenVariable[] = "DISTCOMM_STORE_TOKEN";

// n bytes from the kernel's random generator. Throws std::runtime_error when it has none.
inline std::string random_bytes(size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::getrandom(&out[got], n - got, 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r < 0 && errno != EINTR) {
      throw std::runtime_error(std::string("cannot read random bytes (getrandom): ") + std::strerror(errno));
    }
  }
  return out;
}

inline std::string hex_of(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (const char c : bytes) {
    const auto b = static_cast<uint8_t>(c);
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

// A fresh identity: a 64-bit run id (unique enough to tell jobs apart) and a 256-bit token
// (too many to guess), both as hex.
inline JobIdentity new_job_identity() { return {hex_of(random_bytes(8)), hex_of(random_bytes(32))}; }

}  // namespace distcomm
