#include "api/store/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>
#include <utility>

#include "api/errors.h"
#include "api/store/internal/timed_lock.h"
#include "api/store/internal/call_deadline.h"
#include "api/store/internal/file_lock.h"
#include "api/store/internal/key_value_map.h"
#include "api/store/internal/socket.h"
#include "api/store/internal/store_protocol.h"

namespace distcomm {

using internal::encode_message;

namespace {

// Record kinds of the log. Values are file format: never renumber. A record of a run
// with a run id has it as one more field at the end.
enum Record : uint8_t {
  kSetRecord = 1,         // key, value
  kDeleteRecord = 2,      // key
  kWorkerDoneRecord = 3,  // (none): a store of num_workers was destroyed
};

// Fields of each record kind before the run id.
size_t base_fields(uint8_t kind) { return kind == kSetRecord ? 2 : kind == kDeleteRecord ? 1 : 0; }

// A record of a run: its fields, and the run id when it has one.
Store::Bytes make_record(const std::string& run_id, uint8_t kind, std::vector<internal::FieldRef> fields) {
  if (!run_id.empty()) fields.emplace_back(run_id);
  return encode_message(kind, fields);
}

constexpr std::chrono::milliseconds kFirstPause{10};
constexpr std::chrono::milliseconds kMaxPause{100};
// How long a store being destroyed waits for the file's lock to say its worker is done: a
// lock that stays held this long is a stopped process's, not contention's.
constexpr std::chrono::milliseconds kGoodbyeWait{15000};
// How long a poll of get() or wait() waits for the lock at least, even at the call's
// deadline: a lock busy at that instant (another rank's poll) is not a stuck one.
constexpr std::chrono::milliseconds kLockAtTheDeadline{1000};
constexpr std::chrono::milliseconds kForEver{int64_t{1} << 35};

std::string io_error(const std::string& what, const std::string& path) {
  return "FileStore: cannot " + what + " " + path + ": " + internal::errno_message(errno);
}

// Repeats a pread()- or pwrite()-like call, op(bytes done so far), until n bytes have
// moved or it moves none. Returns the bytes moved, or -1 with errno set.
template <typename Op>
ssize_t transfer(size_t n, Op op) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = op(done);
    if (r > 0) {
      done += static_cast<size_t>(r);
    } else if (r == 0) {
      break;
    } else if (errno != EINTR) {
      return -1;
    }
  }
  return static_cast<ssize_t>(done);
}

}  // namespace

class FileStore::FileLock {
 public:
  // Throws Timeout when another process holds the lock past the deadline.
  FileLock(int fd, bool exclusive, const std::string& path, internal::Clock::time_point since,
           internal::Clock::time_point deadline)
      : fd_(fd) {
    switch (internal::flock_until(fd_, exclusive, deadline)) {
      case internal::FileLockResult::kLocked:
        return;
      case internal::FileLockResult::kFailed:
        throw StoreError(io_error("lock", path));
      case internal::FileLockResult::kTimedOut:
        throw_held_too_long(path, since);
    }
  }
  ~FileLock() { flock(fd_, LOCK_UN); }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  // by_this_process: the wait was for another thread of this process (the store's mutex),
  // itself waiting for the file's lock, not for the file's lock.
  [[noreturn]] static void throw_held_too_long(const std::string& path, internal::Clock::time_point since,
                                               bool by_this_process = false) {
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(internal::Clock::now() - since);
    const std::string scope = internal::StoreCallDeadline::scope_name();
    const std::string message =
        "FileStore: " + path + " stayed locked for " + internal::format_duration(waited) +
        ", as long as this call could wait" + (scope.empty() ? "" : " (" + scope + ")") +
        (by_this_process ? ": another thread of this process held the store all that time, waiting for the file's "
                           "lock, which a process of the job holds and does not let go"
                         : ": a process of the job holds its lock and does not let go") +
        " (stopped, frozen, or its host lost while it held an NFS lock?)";
    // The thread's call deadline ended the wait: its setter tells that apart (call_deadline.h).
    if (internal::StoreCallDeadline::has_passed()) {
      throw internal::StoreCallCutShort(message, by_this_process ? internal::StoreCallCutShort::kBehindAnotherRequest
                                                                 : internal::StoreCallCutShort::kInTheCall);
    }
    throw Timeout(message);
  }

 private:
  int fd_;
};

template <typename Fn>
auto FileStore::locked(bool exclusive, Fn&& fn, internal::Clock::time_point deadline) {
  const auto since = internal::Clock::now();
  // Another thread of this process holds mu_ only while it waits for the file's lock,
  // which is bounded too; this call's own deadline covers both waits.
  std::unique_lock<std::timed_mutex> guard = unique_lock_until(mu_, deadline);
  if (!guard.owns_lock()) FileLock::throw_held_too_long(path_, since, true);
  FileLock lock(fd_, exclusive, path_, since, deadline);
  replay_locked(exclusive);
  return fn();
}

template <typename Fn>
auto FileStore::locked(const char* call, bool exclusive, Fn&& fn) {
  return locked(exclusive, std::forward<Fn>(fn), internal::Clock::now() + call_timeout(call));
}

std::chrono::milliseconds FileStore::call_timeout(const char* call) const {
  // Beyond a year is for ever (and the deadlines cannot overflow).
  return internal::within_call_deadline(std::min(timeout_, kForEver), call);
}

FileStore::FileStore(std::string path, int num_workers, std::string run_id)
    : path_(std::move(path)), num_workers_(num_workers), run_id_(std::move(run_id)),
      map_(std::make_unique<internal::KeyValueMap>()) {
  // O_CREAT without O_EXCL: processes racing to create the file all open the same one.
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0) throw StoreError(io_error("open", path_));
  struct stat st {};
  std::string refused;
  if (fstat(fd_, &st) != 0) {
    refused = io_error("stat", path_);
  } else if (st.st_uid != geteuid()) {
    refused = "FileStore: " + path_ + " belongs to uid " + std::to_string(st.st_uid) + ", not to this user (uid " +
              std::to_string(geteuid()) + "): its owner could read and change this job's rendezvous; use a path "
              "in a folder only you can write";
  } else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    refused = "FileStore: " + path_ + " can be written by other users (mode " +
              std::to_string((st.st_mode >> 6) & 7) + std::to_string((st.st_mode >> 3) & 7) +
              std::to_string(st.st_mode & 7) + "): they could change this job's rendezvous; chmod go-w it, or "
              "remove it";
  }
  if (!refused.empty()) {
    ::close(fd_);
    throw StoreError(refused);
  }
}



FileStore::~FileStore() {
  if (num_workers_ > 0) {
    try {
      // An exiting rank does not wait the store's whole timeout for a stopped peer's lock.
      locked(
          true,
          [&] {
            append_locked(make_record(run_id_, kWorkerDoneRecord, {}));
            if (workers_done_ >= num_workers_) ::unlink(path_.c_str());
          },
          internal::Clock::now() + std::min(timeout_, kGoodbyeWait));
    } catch (const std::exception&) {
      // A destructor cannot report it; the file is merely left behind.
    }
  }
  ::close(fd_);
}

void FileStore::set(const std::string& key, const Bytes& value) {
  locked("SET", true, [&] { append_locked(make_record(run_id_, kSetRecord, {key, value})); });
}

Store::Bytes FileStore::get(const std::string& key) {
  Bytes value;
  const std::chrono::milliseconds timeout = call_timeout("GET");
  poll_until(
      [&](internal::Clock::time_point deadline) {
        return locked(
            false,
            [&]() -> std::vector<std::string> {
              const Bytes* v = map_->find(key);
              if (!v) return {key};
              value = *v;
              return {};
            },
            deadline);
      },
      timeout);
  return value;
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  return locked("ADD", true, [&] {
    const int64_t v = internal::added_value(key, map_->find(key), delta);
    append_locked(make_record(run_id_, kSetRecord, {key, internal::encode_integer(v)}));
    return v;
  });
}

Store::Bytes FileStore::compare_set(const std::string& key, const Bytes& expected,
                                    const Bytes& desired) {
  return locked("COMPARE_SET", true, [&] {
    const Bytes* current = map_->find(key);
    if (!internal::compare_set_matches(current, expected)) return current ? *current : Bytes();
    append_locked(make_record(run_id_, kSetRecord, {key, desired}));
    return desired;
  });
}

bool FileStore::check(const std::vector<std::string>& keys) {
  return locked("CHECK", false, [&] { return map_->missing(keys).empty(); });
}

void FileStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const std::chrono::milliseconds t = internal::within_call_deadline(std::min(resolve(timeout), kForEver), "WAIT");
  poll_until(
      [&](internal::Clock::time_point deadline) {
        return locked(false, [&] { return map_->missing(keys); }, deadline);
      },
      t);
}

bool FileStore::delete_key(const std::string& key) {
  return locked("DELETE", true, [&] {
    if (!map_->contains(key)) return false;
    append_locked(make_record(run_id_, kDeleteRecord, {key}));
    return true;
  });
}

int64_t FileStore::num_keys() {
  return locked("NUM_KEYS", false, [&] { return map_->size(); });
}

void FileStore::replay_locked(bool exclusive) {
  struct stat st {};
  if (fstat(fd_, &st) != 0) throw StoreError(io_error("stat", path_));
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < offset_) {
    throw StoreError("FileStore: " + path_ + " shrank from " + std::to_string(offset_) +
                     " to " + std::to_string(size) +
                     " bytes; another job may be using the same file: give each job its own");
  }
  if (size == offset_) return;
  Bytes buf(size - offset_);
  const ssize_t got = transfer(buf.size(), [&](size_t done) {
    return pread(fd_, buf.data() + done, buf.size() - done, static_cast<off_t>(offset_ + done));
  });
  if (got < 0) throw StoreError(io_error("read", path_));
  offset_ += consume(buf.data(), static_cast<size_t>(got));
  if (exclusive && offset_ < size) {
    // Writers append under the exclusive lock, so a record cut short is one whose
    // writer died mid-write. Cut it off, or every later record would be read out of step.
    if (ftruncate(fd_, static_cast<off_t>(offset_)) != 0) {
      throw StoreError(io_error("truncate the torn last record of", path_));
    }
  }
}

void FileStore::append_locked(const Bytes& record) {
  // Every reader would refuse a record over the parser's bound as corrupt.
  if (record.size() > internal::kMaxMessageBytes) {
    throw InvalidArgument("FileStore: a record of " + std::to_string(record.size()) +
                          " bytes is over the limit of " +
                          std::to_string(internal::kMaxMessageBytes));
  }
  const ssize_t put = transfer(record.size(), [&](size_t done) {
    return pwrite(fd_, record.data() + done, record.size() - done,
                  static_cast<off_t>(offset_ + done));
  });
  if (put != static_cast<ssize_t>(record.size())) {
    if (put >= 0) errno = ENOSPC;  // pwrite() wrote nothing more and said no more
    const std::string error = io_error("write to", path_);
    // Leave no half record for the others to read (a disk that is full, say).
    [[maybe_unused]] int rc = ftruncate(fd_, static_cast<off_t>(offset_));
    throw StoreError(error);
  }
  offset_ += consume(record.data(), record.size());
}

size_t FileStore::consume(const uint8_t* data, size_t size) {
  size_t pos = 0;
  while (pos < size) {
    internal::Message m;
    size_t used = 0;
    std::string error;
    const auto r = internal::parse_message(data + pos, size - pos, &m, &used, &error);
    if (r == internal::ParseResult::kIncomplete) break;
    if (r == internal::ParseResult::kInvalid) {
      throw StoreError("FileStore: " + path_ + " is corrupt at byte " +
                       std::to_string(offset_ + pos) + ": " + error +
                       "; is it a FileStore file of this job?");
    }
    apply(m);
    pos += used;
  }
  return pos;
}

void FileStore::apply(internal::Message& record) {
  size_t n = record.fields.size();
  // Another run's records (a previous job's, left in the file) are skipped.
  const size_t base = base_fields(record.kind);
  if (n == base + 1) {
    if (run_id_.empty() || record.fields.back() != to_bytes(run_id_)) return;
    --n;
  } else if (n == base && !run_id_.empty()) {
    return;
  }
  auto key = [&] { return std::string(record.fields[0].begin(), record.fields[0].end()); };
  if (record.kind == kSetRecord && n == 2) {
    map_->set(key(), std::move(record.fields[1]));
  } else if (record.kind == kDeleteRecord && n == 1) {
    map_->erase(key());
  } else if (record.kind == kWorkerDoneRecord && n == 0) {
    ++workers_done_;
  } else {
    throw StoreError("FileStore: " + path_ + " holds an unknown record (kind " +
                     std::to_string(record.kind) + ", " + std::to_string(n) +
                     " fields); is it a FileStore file of this job?");
  }
}

void FileStore::poll_until(
    const std::function<std::vector<std::string>(internal::Clock::time_point)>& missing_now,
    std::chrono::milliseconds timeout) {
  // Other processes write the file: there is nothing to be woken by, so poll, often at
  // first (rendezvous keys tend to arrive together), then less.
  const auto deadline = internal::Clock::now() + timeout;
  auto pause = kFirstPause;
  while (true) {
    const auto missing = missing_now(std::max(deadline, internal::Clock::now() + kLockAtTheDeadline));
    if (missing.empty()) return;
    const auto left = deadline - internal::Clock::now();
    if (left <= internal::Clock::duration::zero()) {
      // The file was read (a store that answered, as TCPStore's "not yet"): a plain Timeout,
      // naming the scope when its deadline is what ended the wait.
      const Timeout timed_out = internal::wait_timeout("FileStore " + path_, missing, timeout);
      if (!internal::StoreCallDeadline::has_passed()) throw timed_out;
      throw Timeout(timed_out.what() + (" (" + internal::StoreCallDeadline::scope_name() + ")"));
    }
    std::this_thread::sleep_for(std::min<internal::Clock::duration>(pause, left));
    pause = std::min(pause * 2, kMaxPause);
  }
}

}  // namespace distcomm
