#include "backends/nccl/nccl_comm.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "api/errors.h"
#include "backends/nccl/cuda_status.h"
#include "backends/nccl/nccl_types.h"

namespace distcomm {
namespace nccl {
namespace {

NcclComm::Clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  return timeout > std::chrono::milliseconds::zero() ? NcclComm::Clock::now() + timeout
                                                     : NcclComm::Clock::time_point::max();
}

ncclUniqueId exchange_unique_id(const NcclComm::Setup& s) {
  ncclUniqueId id;
  if (s.rank == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) throw_nccl_error("ncclGetUniqueId", r);
    s.store->set(s.key, Store::Bytes(id.internal, id.internal + sizeof(id.internal)));
    return id;
  }
  // Store::wait throws Timeout naming the key when rank 0 never publishes it.
  s.store->wait({s.key}, s.timeout > std::chrono::milliseconds::zero() ? s.timeout : Store::kUseDefault);
  const Store::Bytes bytes = s.store->get(s.key);
  if (bytes.size() != sizeof(id.internal)) {
    throw Error(s.label + ": the ncclUniqueId under store key '" + s.key + "' has " +
                std::to_string(bytes.size()) + " bytes, expected " + std::to_string(sizeof(id.internal)) +
                " (is another job using the same store?)");
  }
  std::memcpy(id.internal, bytes.data(), sizeof(id.internal));
  return id;
}

}  // namespace

NcclComm::NcclComm(int device, std::string label) : device_(device), label_(std::move(label)) {}

std::shared_ptr<NcclComm> NcclComm::create(const Setup& s) {
  const auto deadline = deadline_after(s.timeout);
  const ncclUniqueId id = exchange_unique_id(s);
  std::shared_ptr<NcclComm> c(new NcclComm(s.device, s.label));
  DeviceGuard device(s.device);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = s.nonblocking ? 0 : 1;
  ncclResult_t r;
  {
    std::unique_lock<std::shared_mutex> lock(c->handle_mu_);
    r = ncclCommInitRankConfig(&c->comm_, s.size, id, s.rank, &config);
  }
  r = c->settle(r, deadline);
  if (r == ncclInProgress) {
    c->abort();
    throw Timeout(s.label + ": rank " + std::to_string(s.rank) + " of " + std::to_string(s.size) +
                  " waited " + std::to_string(s.timeout.count()) +
                  " ms for the other ranks to join the communicator; a rank may have died or not yet "
                  "issued its first op on this device");
  }
  if (r != ncclSuccess) {
    const std::string text = s.label + ": " + nccl_error_text("ncclCommInitRankConfig", r, c->comm_);
    c->abort();
    throw_nccl_text(r, text);
  }
  return c;
}

NcclComm::~NcclComm() {
  std::unique_lock<std::shared_mutex> lock(handle_mu_);
  if (!comm_) return;
  try {
    DeviceGuard device(device_);
    // Finalize flushes this rank's work (nonblocking: polled, bounded), then destroy.
    // If it does not settle, abort: a destructor must not wait on peers.
    ncclResult_t r = ncclCommFinalize(comm_);
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (r == ncclInProgress && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (ncclCommGetAsyncError(comm_, &r) != ncclSuccess) break;
    }
    if (r == ncclSuccess) {
      ncclCommDestroy(comm_);
    } else {
      ncclCommAbort(comm_);
    }
  } catch (...) {
    ncclCommAbort(comm_);  // no device to switch to: free the handle all the same
  }
  comm_ = nullptr;
}

ncclResult_t NcclComm::settle(ncclResult_t r, Clock::time_point deadline) {
  auto pause = std::chrono::microseconds(10);
  while (r == ncclInProgress) {
    if (Clock::now() >= deadline) return ncclInProgress;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
    std::shared_lock<std::shared_mutex> lock(handle_mu_);
    if (!comm_) return ncclInvalidUsage;  // aborted meanwhile: enqueue() says so
    const ncclResult_t q = ncclCommGetAsyncError(comm_, &r);
    if (q != ncclSuccess) return q;
  }
  return r;
}

void NcclComm::enqueue(const std::string& what, const Calls& calls, Clock::time_point deadline,
                       const Reduction* reduction) {
  std::lock_guard<std::mutex> order(enqueue_mu_);
  ncclResult_t r;
  ncclRedOp_t redop = ncclSum;
  bool created = false;
  {
    std::shared_lock<std::shared_mutex> lock(handle_mu_);
    if (!comm_) throw PeerFailure(what + ": " + label_ + " was aborted after an earlier fault");
    if (reduction) redop = make_redop(reduction->op, reduction->dtype, comm_, &created);
    r = ncclGroupStart();
    if (r == ncclSuccess) {
      r = calls(comm_, redop);
      // Close the group whatever happened inside it, or this thread's next group nests.
      const ncclResult_t end = ncclGroupEnd();
      if (r == ncclSuccess) r = end;
    }
  }
  r = settle(r, deadline);
  std::string error_text;
  {
    std::shared_lock<std::shared_mutex> lock(handle_mu_);
    // The op has been issued (or failed): a premultiplied sum may go now, if the
    // communicator it belongs to still exists.
    if (created && comm_) ncclRedOpDestroy(redop, comm_);
    if (r != ncclSuccess && r != ncclInProgress && comm_) error_text = nccl_error_text("NCCL", r, comm_);
  }
  if (aborted_) throw PeerFailure(what + ": " + label_ + " was aborted while the op was being issued");
  if (r == ncclInProgress) {
    abort();
    throw Timeout(what + ": NCCL did not accept the op before its timeout; aborted " + label_ +
                  " (a peer may have died or not issued the matching op)");
  }
  if (r != ncclSuccess) throw_nccl_text(r, what + ": " + error_text);
}

std::string NcclComm::async_error() {
  std::shared_lock<std::shared_mutex> lock(handle_mu_);
  if (!comm_) return "";
  ncclResult_t r = ncclSuccess;
  const ncclResult_t q = ncclCommGetAsyncError(comm_, &r);
  if (q != ncclSuccess) return nccl_error_text("ncclCommGetAsyncError", q, comm_);
  if (r == ncclSuccess || r == ncclInProgress) return "";
  return nccl_error_text("ncclCommGetAsyncError", r, comm_);
}

void NcclComm::abort() {
  std::unique_lock<std::shared_mutex> lock(handle_mu_);
  aborted_ = true;
  if (!comm_) return;
  // ncclCommAbort switches to the communicator's device itself and does not wait for
  // peers or for kernels in flight: those are torn down.
  ncclCommAbort(comm_);
  comm_ = nullptr;
}

}  // namespace nccl
}  // namespace distcomm
