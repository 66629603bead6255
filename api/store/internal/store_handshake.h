// The handshake that starts every TCPStore connection: the client names its job (run id)
// and its world size, and, when the server has a token, both sides prove they know it
// without sending it.
//
//   client -> HELLO  magic, run id, client nonce (32 random bytes), world size (i64, -1: unknown)
//   server <- OK     server run id, server nonce, token required (0/1), largest request
//   client -> PROVE  HMAC-SHA256(token, "client" | run id | client nonce | server nonce)
//   server <- OK     HMAC-SHA256(token, "server" | run id | client nonce | server nonce)
//             or ERROR "wrong store token", and the server closes the connection.
//
// Without a token the connection is ready after the first reply. A server whose run id is
// not the client's replies to HELLO (so that the client can say whose store it reached)
// and closes. A server that knows its job's world size refuses a client that names
// another one (ERROR with why): ranks that disagree on the world size would otherwise
// wait for each other until their timeout. Fresh nonces on both sides make a recorded proof useless on another
// connection, and the role in the hash makes a server's proof useless as a client's. The
// client checks the server's proof too: a process squatting on the port cannot pass for
// rank 0 of the job.
#pragma once

#include <cstdint>
#include <string>

#include "api/store/internal/sha256.h"
#include "api/store/internal/socket.h"
#include "api/store/internal/store_protocol.h"
#include "api/process/job_identity.h"

namespace distcomm {
namespace internal {

// 3: WAIT_FOR; 4: GET_PRESENT (store_protocol.h); 5: the world size in HELLO.
constexpr char kHandshakeMagic[] = "distcomm-store/5";
constexpr size_t kNonceBytes = 32;
constexpr size_t kMaxRunIdBytes = 256;
// Every handshake message fits in this; before the handshake is over the server buffers
// no more than this for a connection.
constexpr size_t kMaxHandshakeBytes = 1024;
// How a server's refusal for its connection cap begins: the one refusal that asking again
// may get past (once other connections close), so the client keeps it a StoreError, not a
// StoreRefused.
constexpr char kConnectionCapRefusal[] = "the store already holds ";

struct ClientHello {
  std::string run_id;
  std::string nonce;
  int64_t world_size = -1;  // -1: the client does not know (a launcher, a tool)
};

struct ServerHello {
  std::string run_id;
  std::string nonce;
  bool token_required = false;
  uint64_t max_request_bytes = 0;
};

Store::Bytes encode_client_hello(const ClientHello& h);
// "" when m is a well-formed HELLO, else what is wrong with it.
std::string parse_client_hello(const Message& m, ClientHello* out);
Store::Bytes encode_server_hello(const ServerHello& h);
bool parse_server_hello(const Store::Bytes& payload, ServerHello* out);

enum class Prover { kClient, kServer };
Digest handshake_proof(Prover who, const std::string& token, const std::string& run_id,
                       const std::string& client_nonce, const std::string& server_nonce);

// Text from the other side as a message may show it (a hostile peer's could hold
// anything): printable ASCII, at most max_chars characters (a run id's 64; a refusal's
// reason, which the server's owner may make a sentence long, more).
std::string printable(const std::string& s, size_t max_chars = 64);
// "run id 1a2b...", or "no run id".
std::string describe_run_id(const std::string& id);

// A reply's status and payload: what the client reads after each request.
struct Reply {
  Status status = Status::kOk;
  Store::Bytes payload;
};

// Reads one reply of at most max_payload bytes. A longer one is kError with errno EMSGSIZE.
IoStatus recv_reply(int fd, Reply* out, size_t max_payload, Clock::time_point deadline);

// The client's side of the handshake on a connected socket. Returns what the server said
// about itself. Throws StoreError when the store is not this job's (run id, token), the
// server refused the connection (a server of a job of another world size than world_size
// does; -1: not known here) or did not answer by the deadline. When the server closed
// the connection before answering (a server at its limit of connections still in the
// handshake closes the oldest), sets *closed_early and returns: the caller may retry.
ServerHello client_handshake(int fd, const std::string& server, const JobIdentity& identity,
                             Clock::time_point deadline, bool* closed_early, int64_t world_size = -1);

}  // namespace internal
}  // namespace distcomm
