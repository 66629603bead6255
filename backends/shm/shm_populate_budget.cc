#include "backends/shm/shm_populate_budget.h"

#include <unistd.h>

#include <mutex>
#include <utility>

namespace distcomm {
namespace shm {
namespace {

std::mutex budget_mu;
size_t eager_bytes_in_use = 0;  // guarded by budget_mu
pid_t budget_owner = 0;         // the process whose groups those are: a forked child starts afresh

}  // namespace

PopulateCharge PopulateCharge::take(size_t bytes) {
  PopulateCharge charge;
  if (bytes == 0) return charge;
  std::lock_guard<std::mutex> lock(budget_mu);
  if (budget_owner != ::getpid()) {
    budget_owner = ::getpid();
    eager_bytes_in_use = 0;
  }
  if (bytes > kEagerBytes - eager_bytes_in_use) return charge;
  eager_bytes_in_use += bytes;
  charge.bytes_ = bytes;
  charge.owner_ = budget_owner;
  return charge;
}

PopulateCharge::~PopulateCharge() { give_back(); }

PopulateCharge::PopulateCharge(PopulateCharge&& other) noexcept
    : bytes_(std::exchange(other.bytes_, 0)), owner_(other.owner_) {}

PopulateCharge& PopulateCharge::operator=(PopulateCharge&& other) noexcept {
  if (this != &other) {
    give_back();
    bytes_ = std::exchange(other.bytes_, 0);
    owner_ = other.owner_;
  }
  return *this;
}

void PopulateCharge::give_back() {
  if (bytes_ == 0) return;
  std::lock_guard<std::mutex> lock(budget_mu);
  if (owner_ == budget_owner) eager_bytes_in_use -= bytes_;  // not a parent's, inherited by fork
  bytes_ = 0;
}

}  // namespace shm
}  // namespace distcomm
