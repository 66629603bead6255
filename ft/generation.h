// A generation of a fault-tolerant job: one membership, agreed through the store, and the
// group its steps run over. A new generation is formed when a member is gone (its step's
// verdict was "abort") or when processes wait to join (the verdict said "grow").
//
// Forming generation g: each candidate counts itself in (gen/<g>/arrival/<n>) and waits
// until every member it expects has come or is known to be gone (liveness.h); the first
// candidate to see that writes the membership (compare_set: whoever comes second reads the
// first one's), and every candidate takes what was written. Members keep their order;
// joiners come after them in the order they asked. Candidates that disagree on whom to
// expect still end with one membership (the first written), and one left out of it knows.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "api/store/store.h"
#include "ft/liveness.h"

namespace distcomm {
namespace ft {

// "12.5 s", as init's messages and ft's waiting lines write a duration (never negative).
std::string seconds_text(std::chrono::steady_clock::duration d);

struct Generation {
  uint64_t number = 0;
  uint64_t committed_steps = 0;  // steps committed before it began (the next step's index)
  std::vector<std::string> members;  // in rank order

  int rank_of(const std::string& id) const;  // -1 if not a member
  std::string encode() const;
  static Generation decode(uint64_t number, const std::string& text);
  std::string describe() const;  // "generation 3 (rank0, rank1, rank3)"
};

struct FormRequest {
  uint64_t number = 0;
  std::string me;
  // The last generation's members in order (at the start: every first member): they are
  // expected unless gone, and come first.
  std::vector<std::string> previous;
  uint64_t committed_steps = 0;
  std::chrono::steady_clock::time_point deadline;
  // Also expect the processes waiting to join (registered, compatible, not gone).
  bool admit_joiners = true;
  // While it waits, every this long it logs whom it waits for and when it gives up, as
  // init's waits do ("... has waited 30.2 s for rank1 to arrive (it gives up in 1769.8 s)").
  std::chrono::milliseconds report_every = std::chrono::seconds(30);
};

// "rank0, rank1, rank3" ("nobody" when empty), for messages.
std::string id_list(const std::vector<std::string>& ids);

// Forms generation request.number (see above) as one of its candidates. Throws Timeout at
// the deadline naming whom it still waited for.
Generation form_generation(Store& store, Liveness& liveness, const FormRequest& request);

// The processes waiting to join (registered, not members of `current`, not gone), in the
// order they asked. Reads the joiner list (each entry once per call).
std::vector<std::string> waiting_joiners(Store& store, Liveness& liveness, const std::vector<std::string>& current);
// The same from joiner number *resolved_below on (1 at first), moving it past the entries
// found resolved from there: a member of `current` or gone, which a joiner stays once it is
// (ids are never reused, a dead mark is never taken back, and a member left out of a
// generation is marked dead). So a step's commit reads the joiners that may still wait, not
// every one the job ever had (each a check, a get and a liveness look, on the step's
// critical path).
std::vector<std::string> waiting_joiners(Store& store, Liveness& liveness, const std::vector<std::string>& current,
                                         int64_t* resolved_below);

// This member gave up forming `given_up` (its group's creation failed for good, `why`), and
// ends. Noted in the store; once every member of `given_up` has given up or is dead (a dead
// member never comes back), nobody is left to form another generation or to hold the
// state, and this one writes keys::kStopped: waiting joiners end at once, and no launcher
// starts a replacement into the job (launch/refused_member.h reads it). A member that gives
// up while others still form writes nothing but its own note: they may go on without it.
// Best-effort (a store error leaves the job as it was before: joiners wait out their
// recovery timeout).
void gave_up_forming(Store& store, const Generation& given_up, const std::string& me, const std::string& why) noexcept;

struct AdmissionRequest {
  std::string me;  // the joiner
  std::chrono::steady_clock::time_point deadline;
  // When its wait began: what its reports count from (a call asked again through a stall of
  // the store, store_stall.h, goes on counting).
  std::chrono::steady_clock::time_point started;
  // While it waits, every this long it logs whom it waits for and when it gives up, as a
  // forming does (FormRequest::report_every): a joiner used to wait in silence up to its
  // recovery timeout.
  std::chrono::milliseconds report_every = std::chrono::seconds(30);
};

// A joiner's side: arrives at each new generation from the one after `latest` until one
// takes it in, and returns that one; an empty generation (number 0, no members) when the
// training has finished (Manager::finish) before. Throws Timeout at the deadline, and Error
// (fenced_message) when one was formed without it and it is marked dead, or, naming why, when
// the job stopped (keys::kStopped: StepKeepsFailing, too few members left, forming given up)
// before it was taken in.
Generation await_admission(Store& store, const AdmissionRequest& request);

}  // namespace ft
}  // namespace distcomm
