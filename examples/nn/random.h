// EXAMPLE CODE: a small deterministic random generator (SplitMix64), so that data and
// initial weights are the same on every machine and standard library.
#pragma once

#include <cstdint>

namespace nn {

class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi).
  float uniform(float lo, float hi) {
    const double unit = static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0);
    return static_cast<float>(lo + (hi - lo) * unit);
  }

 private:
  uint64_t state_;
};

}  // namespace nn
