// FileStore: a Store shared through one file by the processes of a job, on one host or
// on a filesystem they all mount (file:// init).
//
// The file is an append-only log of changes, each appended under an exclusive flock();
// every store replays the records it has not seen yet to rebuild its view. get() and
// wait() poll the file, so they answer within a few tens of milliseconds, not at once.
// Create the store after fork(): a child that inherits its parent's store shares its
// open file, and so its lock. A record (key and value) is limited to 256 MiB, and the file
// grows with every change: it suits rendezvous, not heavy traffic. No call waits for the
// file's lock beyond its timeout: a process stopped while it holds the lock costs the
// others a Timeout naming the file, not a wait for good.
//
// With a run id, every record carries it and the store reads only its own run's: the
// keys of a previous job left in the same file (it crashed before cleaning up) are never
// read, and only this run's workers count towards deleting the file. The file is created
// readable by its owner only, and a file that another user owns or may write is refused:
// whoever can write it can change the job's rendezvous.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>

#include "api/store/store.h"

namespace distcomm {

namespace internal {
class KeyValueMap;
struct Message;
}  // namespace internal

class FileStore : public Store {
 public:
  // Opens path, creating it if no process has yet. With num_workers > 0, the last of
  // that many stores (of this run) to be destroyed deletes the file, so that the next job
  // starts empty; otherwise the file is left for the caller to remove.
  explicit FileStore(std::string path, int num_workers = -1, std::string run_id = "");
  ~FileStore() override;
  FileStore(const FileStore&) = delete;
  FileStore& operator=(const FileStore&) = delete;

  using Store::set;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            std::chrono::milliseconds timeout = kUseDefault) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;

  const std::string& path() const { return path_; }

 private:
  class FileLock;

  // Runs fn with the file locked (shared or exclusive) and the view brought up to date;
  // throws Timeout when the lock cannot be had by the deadline (by default the store's
  // timeout, or the thread's call deadline, from now: past it, "store <call> not made").
  template <typename Fn>
  auto locked(bool exclusive, Fn&& fn, std::chrono::steady_clock::time_point deadline);
  template <typename Fn>
  auto locked(const char* call, bool exclusive, Fn&& fn);
  // The store's timeout, bounded by this thread's call deadline (call_deadline.h).
  std::chrono::milliseconds call_timeout(const char* call) const;
  // Reads and applies the records appended since the last call.
  void replay_locked(bool exclusive);
  void append_locked(const Bytes& record);
  // Applies the whole records at the front of data; returns how many bytes they took.
  size_t consume(const uint8_t* data, size_t size);
  void apply(internal::Message& record);
  // Polls until missing_now(deadline) returns nothing, or throws Timeout naming what it
  // returned; each poll may wait for the file's lock until the deadline.
  void poll_until(const std::function<std::vector<std::string>(std::chrono::steady_clock::time_point)>& missing_now,
                  std::chrono::milliseconds timeout);

  std::string path_;
  int num_workers_;
  std::string run_id_;
  int fd_ = -1;
  std::timed_mutex mu_;  // flock() does not exclude threads sharing our descriptor
  uint64_t offset_ = 0;
  int64_t workers_done_ = 0;
  std::unique_ptr<internal::KeyValueMap> map_;
};

}  // namespace distcomm
