#include "api/store/internal/store_handshake.h"

#include <cerrno>

#include "api/errors.h"
#include "api/store/internal/key_value_map.h"

namespace distcomm {
namespace internal {

namespace {

constexpr size_t kReplyHeaderBytes = 5;  // u8 status, u32 length

std::string text_of(const Store::Bytes& b) { return std::string(b.begin(), b.end()); }

}  // namespace

std::string describe_run_id(const std::string& id) {
  return id.empty() ? "no run id" : "run id " + printable(id);
}

std::string printable(const std::string& s, size_t max_chars) {
  std::string out;
  for (const char c : s.substr(0, max_chars)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  return out;
}

Store::Bytes encode_client_hello(const ClientHello& h) {
  return encode_message(static_cast<uint8_t>(Command::kHello),
                        {std::string(kHandshakeMagic), h.run_id, h.nonce, encode_i64(h.world_size)});
}

std::string parse_client_hello(const Message& m, ClientHello* out) {
  if (m.kind != static_cast<uint8_t>(Command::kHello)) return "the first request is not HELLO";
  if (m.fields.size() != 4) return "HELLO has " + std::to_string(m.fields.size()) + " fields, not 4";
  if (text_of(m.fields[0]) != kHandshakeMagic) return "HELLO is not of protocol " + std::string(kHandshakeMagic);
  if (m.fields[1].size() > kMaxRunIdBytes) return "the run id is over " + std::to_string(kMaxRunIdBytes) + " bytes";
  if (m.fields[2].size() != kNonceBytes) return "the nonce is not " + std::to_string(kNonceBytes) + " bytes";
  if (m.fields[3].size() != 8) return "the world size is not 8 bytes";
  out->run_id = text_of(m.fields[1]);
  out->nonce = text_of(m.fields[2]);
  out->world_size = get_i64(m.fields[3].data());
  return "";
}

Store::Bytes encode_server_hello(const ServerHello& h) {
  return encode_message(static_cast<uint8_t>(Command::kHello),
                        {h.run_id, h.nonce, std::string(h.token_required ? "1" : "0"),
                         encode_i64(static_cast<int64_t>(h.max_request_bytes))});
}

bool parse_server_hello(const Store::Bytes& payload, ServerHello* out) {
  Message m;
  size_t used = 0;
  std::string error;
  if (parse_message(payload.data(), payload.size(), &m, &used, &error, kMaxHandshakeBytes) !=
          ParseResult::kComplete ||
      used != payload.size() || m.kind != static_cast<uint8_t>(Command::kHello) || m.fields.size() != 4 ||
      m.fields[1].size() != kNonceBytes || m.fields[3].size() != 8) {
    return false;
  }
  const std::string required = text_of(m.fields[2]);
  if (required != "0" && required != "1") return false;
  out->run_id = text_of(m.fields[0]);
  out->nonce = text_of(m.fields[1]);
  out->token_required = required == "1";
  out->max_request_bytes = static_cast<uint64_t>(get_i64(m.fields[3].data()));
  return true;
}

Digest handshake_proof(Prover who, const std::string& token, const std::string& run_id,
                       const std::string& client_nonce, const std::string& server_nonce) {
  // Lengths go in with the run id so that no two different inputs hash the same text.
  Store::Bytes length;
  put_u32(&length, static_cast<uint32_t>(run_id.size()));
  const std::string message = std::string(who == Prover::kClient ? "distcomm store client" : "distcomm store server") +
                              '\0' + std::string(length.begin(), length.end()) + run_id + client_nonce + server_nonce;
  return hmac_sha256(token, message);
}

IoStatus recv_reply(int fd, Reply* out, size_t max_payload, Clock::time_point deadline) {
  uint8_t header[kReplyHeaderBytes];
  IoStatus s = recv_all(fd, header, sizeof(header), deadline);
  if (s != IoStatus::kOk) return s;
  const uint32_t len = get_u32(header + 1);
  if (len > max_payload || header[0] > static_cast<uint8_t>(Status::kError)) {
    errno = EMSGSIZE;
    return IoStatus::kError;
  }
  out->status = static_cast<Status>(header[0]);
  out->payload.resize(len);
  return recv_all(fd, out->payload.data(), len, deadline);
}

ServerHello client_handshake(int fd, const std::string& server, const JobIdentity& identity,
                             Clock::time_point deadline, bool* closed_early, int64_t world_size) {
  *closed_early = false;
  const std::string who = "TCPStore: the store at " + server;
  std::string their_id;  // known after the first reply
  // One exchange: send, read the reply. False when the server closed first.
  auto exchange = [&](const Store::Bytes& request, Reply* reply) {
    IoStatus s = send_all(fd, request.data(), request.size(), deadline);
    if (s == IoStatus::kOk) s = recv_reply(fd, reply, kMaxHandshakeBytes, deadline);
    if (s == IoStatus::kClosed) return false;
    if (s == IoStatus::kTimeout) {
      // The kernel completes a connection to a listening socket by itself: a server that
      // cannot accept() it (out of file descriptors) or is stopped never answers either.
      throw StoreError("TCPStore: " + server + " accepted the connection but did not answer the handshake: its "
                       "server may be unable to take more connections (out of file descriptors: raise `ulimit -n` "
                       "where it runs; or stopped), or it is not a TCPStore server (of the same version)");
    }
    if (s == IoStatus::kError) {
      throw StoreError("TCPStore: the handshake with " + server + " failed: " + errno_message(errno) +
                       "; is it a TCPStore server of the same version?");
    }
    if (reply->status == Status::kError) {
      const std::string why = printable(text_of(reply->payload), kMaxHandshakeBytes);
      const std::string refused = who + (their_id.empty() ? "" : " (" + their_id + ")") +
                                  " refused this connection: " + why +
                                  (why == "wrong store token"
                                       ? std::string("; every rank needs rank 0's ") + kStoreTokenVariable
                                       : std::string());
      // At its connection cap the server may take this client once others close: retried.
      if (why.rfind(kConnectionCapRefusal, 0) == 0) throw StoreError(refused);
      throw StoreRefused(refused);
    }
    return true;
  };

  ClientHello hello{identity.run_id, random_bytes(kNonceBytes), world_size};
  Reply reply;
  if (!exchange(encode_client_hello(hello), &reply)) {
    *closed_early = true;
    return {};
  }
  ServerHello theirs;
  if (!parse_server_hello(reply.payload, &theirs)) {
    throw StoreError("TCPStore: " + server +
                     " answered the handshake with something else; is it a TCPStore server of the same version?");
  }
  const std::string ours = describe_run_id(identity.run_id);
  their_id = describe_run_id(theirs.run_id);
  if (theirs.run_id != identity.run_id) {
    throw StoreRefused(who + " belongs to another job (" + their_id + "; this rank has " + ours +
                     "): is another job using this port? Give each job its own MASTER_PORT, and every rank of a "
                     "job the same " + kRunIdVariable);
  }
  if (!theirs.token_required) {
    if (!identity.token.empty()) {
      throw StoreRefused(who + " (" + their_id + ") has no store token but this rank has one: rank 0 was started "
                       "without " + kStoreTokenVariable + ", or another job serves this port");
    }
    return theirs;
  }
  if (identity.token.empty()) {
    throw StoreRefused(who + " (" + their_id + ") asks for a store token and this rank has none: start every rank "
                     "with rank 0's " + kRunIdVariable + " and " + kStoreTokenVariable + " (tools/launch and "
                     "spawn() do)");
  }
  const Digest mine = handshake_proof(Prover::kClient, identity.token, identity.run_id, hello.nonce, theirs.nonce);
  const Store::Bytes prove = encode_message(static_cast<uint8_t>(Command::kProve), {FieldRef(mine.data(), mine.size())});
  if (!exchange(prove, &reply)) {
    throw StoreError(who + " (" + their_id + ") closed the connection after this rank's proof of the token");
  }
  const Digest expected = handshake_proof(Prover::kServer, identity.token, identity.run_id, hello.nonce, theirs.nonce);
  if (reply.payload.size() != expected.size() ||
      !equal_in_constant_time(reply.payload.data(), expected.data(), expected.size())) {
    throw StoreRefused(who + " (" + their_id + ") did not prove that it knows the store token: something other "
                     "than this job's rank 0 serves this port");
  }
  return theirs;
}

}  // namespace internal
}  // namespace distcomm
