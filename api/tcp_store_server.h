// TCPStoreServer: the key-value server behind TCPStore.
//
// One thread runs a poll() loop over every connection, so a thousand ranks cost a
// thousand sockets, not a thousand threads. A get() or wait() whose keys are missing
// parks that client on the keys, and the set/add/compare_set that creates them answers
// it: nothing blocks the loop. Clients apply their own timeouts.
//
// The server reads untrusted bytes: a client that sends an unknown command, a bad length
// or more than the size limits (store_protocol.h: 64 KiB keys, 256 MiB messages) is
// disconnected, and the others are served on.
#pragma once

#include <memory>
#include <string>
#include <thread>

namespace distcomm {

class TCPStoreServer {
 public:
  // host "" listens on every interface; port 0 picks a free port (see port()).
  explicit TCPStoreServer(std::string host = "", int port = 0);
  ~TCPStoreServer();
  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;

  // Listens and starts serving. Throws StoreError when the address cannot be bound.
  void start();
  // Closes every connection and stops the thread. Safe to call twice.
  void stop();
  bool running() const { return thread_.joinable(); }
  // The port it listens on, known once start() returned.
  int port() const { return port_; }

 private:
  class Loop;

  std::string host_;
  int port_;
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

}  // namespace distcomm
