// The one exception hierarchy of distcomm. Every error a user can see derives from Error.
//
// Messages say where (rank, group, op, sequence number) and what to do. Context is
// attached where it is known: the ProcessGroup adds rank/group/op/seq to errors raised by
// backends, so backends can throw short messages.
#pragma once

#include <stdexcept>
#include <string>

namespace distcomm {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
  ~Error() override;
};

// Caught before any byte is sent: wrong shape, dtype, root, rank, op/dtype pair...
class InvalidArgument : public Error {
 public:
  using Error::Error;
  ~InvalidArgument() override;
};

// An operation or a store wait did not finish in time.
class Timeout : public Error {
 public:
  using Error::Error;
  ~Timeout() override;
};

// A peer died, or a connection closed or broke. The group is unusable afterwards.
class PeerFailure : public Error {
 public:
  using Error::Error;
  ~PeerFailure() override;
};

// Ranks disagree on which collective they are running (debug checks).
class Desync : public Error {
 public:
  using Error::Error;
  ~Desync() override;
};

// A Desync that every rank of the group found at the same op, which failed on all of them
// together: the group stays in step and usable (shm's all_to_all split sizes that do not
// pair up). The ProcessGroup does not count it as the group's failure.
class AgreedDesync : public Desync {
 public:
  using Desync::Desync;
  ~AgreedDesync() override;
};

// A backend could not be loaded or cannot run here (no plugin, ABI mismatch, no GPU).
class BackendUnavailable : public Error {
 public:
  using Error::Error;
  ~BackendUnavailable() override;
};

// A store failed: connection, protocol, or file error (a wait timeout is Timeout).
class StoreError : public Error {
 public:
  using Error::Error;
  ~StoreError() override;
};

// The store answered and refused this client: another job's store (another run id), a
// wrong or missing store token, a server that could not prove the token, another world
// size. Asking again gets the same answer, unlike a StoreError of a connection.
class StoreRefused : public StoreError {
 public:
  using StoreError::StoreError;
  ~StoreRefused() override;
};

// An operation a backend does not implement.
class Unsupported : public Error {
 public:
  using Error::Error;
  ~Unsupported() override;
};

}  // namespace distcomm

#include <exception>

namespace distcomm {

// The same exception type with "context: " put before its message, so that an error a
// backend raised says which rank, group, op and sequence number it belongs to.
// Unknown exception types become Error.
std::exception_ptr with_context(std::exception_ptr e, const std::string& context);

// The same exception type with "; detail" after its message.
std::exception_ptr with_detail(std::exception_ptr e, const std::string& detail);

// The message of any exception ("unknown exception" for one that is not a std::exception).
std::string message_of(std::exception_ptr e);

}  // namespace distcomm
