// Numbers a group's ops and gives each its context (OpContext): its sequence number in
// its kind's sequence, its resolved timeout, its description ("rank 1/4 group 'world'
// all_reduce #12 (float32[1000] on cpu)") and its fingerprint's start. Also the ordinal of
// each point-to-point transfer between two ranks with one tag, and how many ops of each
// type this rank issued (DISTCOMM_DEBUG=INFO's count when the group ends).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "api/ops/op_spec.h"

namespace distcomm {

class OpNumbering {
 public:
  OpNumbering(std::string where_prefix, std::chrono::milliseconds group_timeout);

  // The op's context: numbered, described, its fingerprint filled from spec (for point to
  // point ops, a peer known now gets the transfer's ordinal).
  OpContext next(const OpSpec& spec);
  // The next transfer's number among this rank's sends (or recvs) with `peer` and `tag`: a
  // send and a recv pair up when their numbers agree (messages between two ranks with one
  // tag do not overtake each other).
  int64_t next_ordinal(bool is_send, int peer, int tag);
  // The sequence number the next collective will get.
  uint64_t next_seq() const { return seq_.load(); }
  // Ops the program issued on this rank, of one type (not the group's own internal ones).
  uint64_t issued(OpType op) const { return issued_[static_cast<size_t>(op)].load(std::memory_order_relaxed); }

 private:
  const std::string where_prefix_;
  const std::chrono::milliseconds group_timeout_;
  std::atomic<uint64_t> seq_{0};
  std::atomic<uint64_t> p2p_seq_{0};
  std::atomic<uint64_t> internal_seq_{0};
  std::array<std::atomic<uint64_t>, static_cast<size_t>(OpType::kBatchP2P) + 1> issued_{};
  std::mutex ordinals_mu_;
  std::map<std::tuple<bool, int, int>, int64_t> transfers_;  // per (is send, peer, tag)
};

}  // namespace distcomm
