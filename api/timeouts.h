// The timeout values the whole API shares.
#pragma once

#include <chrono>

namespace distcomm {

// A group's timeout unless the program sets one (InitOptions, ProcessGroupOptions, what a
// backend is given): 30 minutes, torch.distributed's default. An op, a rendezvous or a
// wait of the group that takes longer fails with Timeout.
inline constexpr std::chrono::milliseconds kDefaultGroupTimeout = std::chrono::minutes(30);

// A timeout argument left at kUseDefault takes the timeout of what runs it: an op's options
// the group's timeout, a store call the store's, Work::wait() none of its own (it waits
// until the op ends, which the op's timeout bounds). Any negative value means the same.
//
// An op's timeout option (options.h: every op's options, P2POptions too) is positive or
// kUseDefault. Zero is refused with InvalidArgument by the call itself, on the rank that
// passes it, before anything is sent ("timeout=0 ms: give a positive timeout, or kUseDefault
// for the group's"): backends read it differently ("never" on gloo and mpi, "at once" on
// shm), so it has no one meaning to keep. To wait without bound, give a large timeout.
// Work::wait(0) is not refused: it is a poll, returning (or rethrowing the op's error) if
// the op has ended and throwing Timeout if not.
inline constexpr std::chrono::milliseconds kUseDefault{-1};

inline constexpr bool is_use_default(std::chrono::milliseconds timeout) {
  return timeout < std::chrono::milliseconds::zero();
}

}  // namespace distcomm
