#include "backends/mpi/mpi_agreement.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "api/errors.h"
#include "api/diagnostics/progress_report.h"
#include "backends/mpi/mpi_types.h"

namespace distcomm {
namespace mpi {
namespace {

// Room for one rank's encoded fingerprint in the table; a longer one (an all_to_all over
// hundreds of ranks) shows as "(too long to show)".
constexpr size_t kSlotBytes = 1024;

}  // namespace

Agreement::Agreement(const OpFingerprint& fingerprint, int rank, int size)
    : fingerprint_(fingerprint), rank_(rank), size_(size) {}

std::exception_ptr Agreement::start(MPI_Comm comm) {
  const uint64_t h = fingerprint_.agreement_hash();
  send_[0] = h;
  send_[1] = ~h;
  stage_ = Stage::kHash;
  const int rc = MPI_Iallreduce(send_, result_, 2, MPI_UINT64_T, MPI_MIN, comm, &request_);
  return rc == MPI_SUCCESS ? nullptr : error_from("MPI_Iallreduce (agreement check)", rc);
}

std::exception_ptr Agreement::start_table(MPI_Comm comm) {
  stage_ = Stage::kTable;
  table_.assign(kSlotBytes * static_cast<size_t>(size_ + 1), '\0');
  const std::string mine = fingerprint_.encode();
  char* own = table_.data() + kSlotBytes * static_cast<size_t>(size_);  // the send slot, after the table
  if (mine.size() < kSlotBytes) std::memcpy(own, mine.data(), mine.size());
  const int rc = MPI_Iallgather(own, static_cast<int>(kSlotBytes), MPI_CHAR, table_.data(),
                                static_cast<int>(kSlotBytes), MPI_CHAR, comm, &request_);
  return rc == MPI_SUCCESS ? nullptr : error_from("MPI_Iallgather (agreement table)", rc);
}

std::exception_ptr Agreement::advance(MPI_Comm comm, bool* passed) {
  *passed = stage_ == Stage::kPassed;
  while (!*passed) {
    int flag = 0;
    const int rc = MPI_Test(&request_, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return error_from("MPI_Test (agreement check)", rc);
    if (!flag) return nullptr;
    switch (stage_) {
      case Stage::kHash: {
        if (result_[0] != ~result_[1]) return start_table(comm);
        if (fingerprint_.op != OpType::kAllToAll) {
          stage_ = Stage::kPassed;
          break;
        }
        // Every rank runs this all_to_all: do the splits pair up?
        stage_ = Stage::kPairs;
        send_[0] = fingerprint_.split_pairs_sum(rank_);
        const int started = MPI_Iallreduce(send_, result_, 1, MPI_UINT64_T, MPI_SUM, comm, &request_);
        if (started != MPI_SUCCESS) return error_from("MPI_Iallreduce (all_to_all splits check)", started);
        break;
      }
      case Stage::kPairs:
        if (result_[0] != 0) return start_table(comm);
        stage_ = Stage::kPassed;
        break;
      case Stage::kTable:
        return desync();
      case Stage::kPassed:
        break;
    }
    *passed = stage_ == Stage::kPassed;
  }
  return nullptr;
}

std::exception_ptr Agreement::desync() const {
  std::vector<std::optional<OpFingerprint>> by_rank;
  std::vector<OpFingerprint> all_to_alls;
  bool all_all_to_all = true;
  for (int r = 0; r < size_; ++r) {
    const char* slot = table_.data() + kSlotBytes * static_cast<size_t>(r);
    by_rank.push_back(OpFingerprint::decode(std::string(slot, strnlen(slot, kSlotBytes))));
    all_all_to_all = all_all_to_all && by_rank.back() && by_rank.back()->op == OpType::kAllToAll;
    all_to_alls.push_back(by_rank.back().value_or(OpFingerprint()));
  }
  const std::string pairs = all_all_to_all ? all_to_all_mismatches(all_to_alls) : std::string();
  return std::make_exception_ptr(
      Desync(desync_message(fingerprint_.seq, fingerprint_table(by_rank, "(too long to show)"), pairs)));
}

bool Agreement::test_abandoned() {
  if (request_ == MPI_REQUEST_NULL) return true;
  int flag = 0;
  if (MPI_Test(&request_, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && !flag) return false;
  request_ = MPI_REQUEST_NULL;
  return true;
}

}  // namespace mpi
}  // namespace distcomm
