#include "backends/shm/shm_populate_budget.h"

#include <mutex>
#include <utility>

namespace distcomm {
namespace shm {
namespace {

std::mutex budget_mu;
size_t eager_bytes_in_use = 0;  // guarded by budget_mu

}  // namespace

PopulateCharge PopulateCharge::take(size_t bytes) {
  PopulateCharge charge;
  if (bytes == 0) return charge;
  std::lock_guard<std::mutex> lock(budget_mu);
  if (bytes > kEagerBytes - eager_bytes_in_use) return charge;
  eager_bytes_in_use += bytes;
  charge.bytes_ = bytes;
  return charge;
}

PopulateCharge::~PopulateCharge() { give_back(); }

PopulateCharge::PopulateCharge(PopulateCharge&& other) noexcept : bytes_(std::exchange(other.bytes_, 0)) {}

PopulateCharge& PopulateCharge::operator=(PopulateCharge&& other) noexcept {
  if (this != &other) {
    give_back();
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void PopulateCharge::give_back() {
  if (bytes_ == 0) return;
  std::lock_guard<std::mutex> lock(budget_mu);
  eager_bytes_in_use -= bytes_;
  bytes_ = 0;
}

}  // namespace shm
}  // namespace distcomm
