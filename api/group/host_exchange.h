// HostExchange: small host messages between the ranks of one group, outside the ops.
//
// What the core and its tools need to agree on something across ranks -- split's colors
// and keys, ordered_print's lines, DDP's replica descriptions, and later debug fingerprints
// or a failure's culprit -- goes through this one primitive, never through the store or the
// group's collectives directly. Each ProcessGroup owns one (ProcessGroup::exchange()).
//
// Two transports, picked once when the group is created:
//   - the group's store, when every rank shares one (gloo, nccl, any backend that rendezvous
//     through the store): one key per rank and call, no tensor op, no sequence number;
//   - the group's own host collectives, when there is no shared store (a backend that finds
//     its peers by itself, MPI): an all_gather of lengths, then of the bytes. These run on
//     the group's CPU backend directly: they take the group's next sequence number (so a
//     backend that keys messages by it never mixes them with an op) but skip validation.
//
// Every call is collective: all ranks of the group make the same calls in the same order.
// Calls are numbered per group, so subgroups never see each other's messages. Every wait
// has the group's timeout and ends early when the group has failed (a call during the group's own creation: the creation's deadline,
// and it ends when another rank's part of the creation failed, init_wait.h); a Timeout names
// the ranks that did not post.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/store/store.h"
#include "api/tensor.h"

namespace distcomm {

class HostExchange {
 public:
  virtual ~HostExchange();

  // Every rank's bytes, in rank order, on every rank (torch's all_gather_object).
  // `purpose` names the call ("ordered_print", "split #0 on group 'world'") and travels with
  // the bytes: ranks whose calls pair up with different purposes (one rank's ordered_print
  // with another's DDP log line, or with its split) get a Desync naming each rank's, instead
  // of each other's bytes. Every rank that reads the messages checks them.
  std::vector<std::string> all_gather(const std::string& mine, const std::string& purpose = "");
  // Every rank's bytes, in rank order, on `root`; an empty vector elsewhere. Over a store,
  // the other ranks return as soon as theirs is posted (only the root checks the purposes).
  std::vector<std::string> gather(const std::string& mine, int root, const std::string& purpose = "");

 protected:
  // The transports move the framed messages (purpose and bytes) as they are.
  virtual std::vector<std::string> all_gather_messages(const std::string& mine) = 0;
  virtual std::vector<std::string> gather_messages(const std::string& mine, int root) = 0;
  // "rank 1/4 group 'world'": before a Desync's text.
  virtual const std::string& where() const = 0;
  // The number the transport gives its next call ("host message exchange #3" in its errors).
  virtual uint64_t next_call() const = 0;
};

struct HostExchangeOptions {
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{0};  // every wait, resolved (the group's)
  std::string where;  // "rank 1/4 group 'world'", put before error messages
  // The process that serves the store ("rank 0", or "the launcher"), if one of the job's
  // does: a store that goes away during a call is then a PeerFailure saying it has gone
  // (internal/store_host.h).
  std::string store_host;
  // Asked between slices of a wait (every kGroupFailureCheck) about the ranks that have not
  // posted yet: throws when they will not -- the group was aborted (ft's liveness monitor
  // does that for a member found gone), or its failure published on a backend's board
  // blames one of them (a backend saw its process die; its program ended with an error) --
  // so that a wait for a dead rank ends then, not at the group's timeout (30 minutes by
  // default).
  // `missing` says which ranks those are (store requests: asked only when needed).
  std::function<void(const std::function<std::vector<int>()>& missing)> raise_if_group_failed;
};

// How often a wait of the store exchange asks raise_if_group_failed: how late it learns.
inline constexpr std::chrono::milliseconds kGroupFailureCheck{500};

// Over a store every rank of the group reaches. Keys live under key_prefix; a rank deletes
// its own keys once every rank is known to have read them.
std::unique_ptr<HostExchange> make_store_exchange(const HostExchangeOptions& options, StorePtr store,
                                                  std::string key_prefix);

// The keys a store exchange leaves in the store, every rank's, once every rank is done with
// it: its last all_gather's (each rank deletes its own at its next all_gather; a gather's
// root deletes the gather's at once). None for an exchange over the group's collectives.
std::vector<std::string> store_exchange_keys_left(const HostExchange& exchange);

// In place of this rank's next round, for a rank that cannot take part in the call it
// serves at all (it aborted the group: ProcessGroup's split and split_group): takes the
// round's number as the round would, and, over a store, posts so with `why` (its message,
// cannot_take_part_text) without waiting. The ranks that wait in that round (all_gather,
// gather's root, agree_on_arguments) end with a PeerFailure "... host message exchange #N:
// rank R cannot take part: <why>" once every rank's part is in, not at their timeout.
// Over the group's collectives nothing is sent: they are what the rank can no longer use.
void post_cannot_take_part(HostExchange& exchange, const std::string& why);

// exchange.all_gather(mine, call) on behalf of `call` ("split #0 on group 'world'"): its
// error (a peer's death, a timeout) says which call of the program's was waiting.
std::vector<std::string> all_gather_for(HostExchange& exchange, const std::string& call, const std::string& mine);

// A collective call's arguments, checked on every rank together (split_group, DeviceMesh):
// each rank posts `arguments` (its view of them, as text) or, when its own check found them
// bad, `error`. Throws InvalidArgument on every rank alike, "<call>: rank R gave ...",
// naming the first rank whose arguments are bad or differ from rank 0's, so that one rank's
// bad call never leaves the others waiting for it. One exchange round of digests (a second,
// of the texts, only when they differ, to name them).
void agree_on_arguments(HostExchange& exchange, const std::string& call, const std::string& error,
                        const std::string& arguments);

// Runs an all_gather of host bytes over the group and waits for it: `out` holds size()
// times `in`'s elements, rank r's at offset r * in.numel().
using AllGatherBytes = std::function<void(Tensor& out, const Tensor& in)>;
// Over the group's collectives (groups without a shared store).
std::unique_ptr<HostExchange> make_collective_exchange(const HostExchangeOptions& options,
                                                       AllGatherBytes all_gather);

// Every rank's byte string in rank order, over `all_gather` (a group of `size`): the
// lengths, then the bytes padded to the longest (left out when every string is empty, on
// every rank alike). The collective exchange's all_gather and all_gather_object
// (object_collectives.h) both.
std::vector<std::string> all_gather_strings(int size, const std::string& mine, const AllGatherBytes& all_gather);

}  // namespace distcomm
