// What a rank says of a silent peer's process on this host (peer_process.h): the peer
// publishes its pid with its start time, so that a pid reused by another process after the
// peer's ended is not described as the peer (a review: a reused pid of a stopped process
// would have said the peer "is stopped").
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <thread>

#include "api/diagnostics/peer_process.h"
#include "api/group/auto_backend.h"
#include "api/process/fenced_member.h"
#include "api/store/hash_store.h"

namespace distcomm {
namespace {
using local::ProcessStat;
using local::read_process_stat;

// A child stopped by SIGSTOP (state T once the kernel has stopped it); killed at the end.
class StoppedChild {
 public:
  StoppedChild() {
    pid_ = ::fork();
    if (pid_ == 0) {
      for (;;) ::pause();
    }
    ::kill(pid_, SIGSTOP);
    for (int i = 0; i < 500 && read_process_stat(pid_).state != 'T'; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ~StoppedChild() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_;
};

std::string note_of_rank1(Store& board) {
  std::map<int, PeerProcess> cache;
  return silent_process_notes(board, {false, true}, process_domain(), cache)[1];
}

TEST(PeerProcess, AStoppedPeerIsSaidStopped) {
  StoppedChild child;
  HashStore board;
  const ProcessStat stat = read_process_stat(child.pid());
  board.set(peer_process_key(1),
            process_domain() + "\n" + std::to_string(child.pid()) + " " + std::to_string(stat.start_ticks));
  const std::string note = note_of_rank1(board);
  EXPECT_NE(note.find("its process " + std::to_string(child.pid()) + " on this host is stopped"), std::string::npos)
      << note;
}

// The published start is not that of the process now under the pid: the peer's process has
// ended and its pid was reused (here: a stopped process that is not the peer).
TEST(PeerProcess, APidNowOfAnotherProcessIsNotThePeer) {
  StoppedChild child;
  HashStore board;
  const ProcessStat stat = read_process_stat(child.pid());
  board.set(peer_process_key(1),
            process_domain() + "\n" + std::to_string(child.pid()) + " " + std::to_string(stat.start_ticks + 1));
  const std::string note = note_of_rank1(board);
  EXPECT_EQ(note, "its process " + std::to_string(child.pid()) +
                      " on this host has ended (the pid now belongs to another process)");
}

// A value without the start (a core before it published one) is still read.
TEST(PeerProcess, AValueWithoutTheStartIsRead) {
  StoppedChild child;
  HashStore board;
  board.set(peer_process_key(1), process_domain() + "\n" + std::to_string(child.pid()));
  EXPECT_NE(note_of_rank1(board).find("is stopped"), std::string::npos);
}

// What this process publishes carries its own start.
TEST(PeerProcess, ThisProcessPublishesItsPidAndStart) {
  HashStore board;
  ASSERT_FALSE(publish_this_process(board, 0).empty());
  const std::string value = board.get_string(peer_process_key(0));
  EXPECT_EQ(value, process_domain() + "\n" + std::to_string(::getpid()) + " " +
                       std::to_string(read_process_stat(::getpid()).start_ticks));
}

}  // namespace
}  // namespace distcomm
