// The framing TCPStore speaks on the wire and FileStore writes to its log.
//
// A message is: u8 kind, u32 field count, then each field as u32 length + bytes, all
// integers little-endian. A TCPStore reply is: u8 status, then one field. A TCPStore
// connection starts with a handshake (store_handshake.h); the data commands come after.
//
// The parser reads untrusted bytes (a TCPStore server accepts anyone who can connect), so
// every length is checked against a limit before it is trusted, and nothing is ever
// allocated from a length that was not checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "api/store/store.h"

namespace distcomm {
namespace internal {

// A key names a rendezvous slot; 64 KiB is far above any real one.
constexpr size_t kMaxKeyBytes = size_t{64} << 10;
// The largest message the parser takes, and so FileStore's largest record. A TCPStore
// server takes less: a request must fit in its buffer budget (TCPStoreLimits, 64 MiB by
// default), and it tells its clients its limit in the handshake.
constexpr size_t kMaxMessageBytes = size_t{256} << 20;
// Bounds the per-field bookkeeping a message can cost (e.g. wait() on many keys).
constexpr uint32_t kMaxFields = 1u << 16;
// How an error reply to a wait begins when the server knows that the job cannot run (a
// rank of it says the job has another number of ranks, tcp_store_server.h): the client
// then throws InvalidArgument, the job's mistake, not StoreError, the store's.
inline constexpr char kJobCannotRun[] = "the job cannot run: ";

// TCPStore request kinds. Values are wire format: never renumber.
enum class Command : uint8_t {
  kSet = 1,         // key, value
  kGet = 2,         // key; the reply is held until the key exists
  kAdd = 3,         // key, delta (8 bytes)
  kCompareSet = 4,  // key, expected, desired
  kCheck = 5,       // keys...; reply: one byte per key, 1 when it exists
  kWait = 6,        // keys...; the reply is held until every key exists
  kDelete = 7,      // key; reply: one byte, 1 when the key existed
  kNumKeys = 8,     // reply: 8 bytes
  // The handshake (store_handshake.h), only before the data commands.
  kHello = 9,   // magic, run id, client nonce
  kProve = 10,  // the client's proof
  // Protocol 3: timeout in ms (8 bytes), keys...; reply: one byte, 1, once every key
  // exists; when the timeout came first, 0 and then one byte per key, 1 for those that exist. The server ends the wait, so the connection
  // stays in step (a client that gave up on a WAIT itself had to reconnect).
  kWaitFor = 11,
  // Protocol 4: keys...; reply: per key one byte, 1 when it exists, and then (only then) a
  // u32 length and its value. Never held: the keys that do not exist are said so. One
  // request reads what N ranks published (the stall watch's reports) instead of 2N.
  kGetPresent = 12,
};
// A data command (SET to NUM_KEYS, WAIT_FOR, GET_PRESENT).
bool is_command(uint8_t kind);
const char* command_name(Command c);

enum class Status : uint8_t { kOk = 0, kError = 1 };

struct Message {
  uint8_t kind = 0;
  std::vector<Store::Bytes> fields;
};

// A view of one field to encode, so that callers need not copy keys and values.
struct FieldRef {
  FieldRef(const std::string& s)
      : data(reinterpret_cast<const uint8_t*>(s.data())), size(s.size()) {}
  FieldRef(const Store::Bytes& b) : data(b.data()), size(b.size()) {}
  FieldRef(const uint8_t* d, size_t n) : data(d), size(n) {}
  const uint8_t* data;
  size_t size;
};

Store::Bytes encode_message(uint8_t kind, const std::vector<FieldRef>& fields);
// The 5 bytes before a reply's payload.
Store::Bytes encode_reply_header(Status status, size_t payload_bytes);

enum class ParseResult { kComplete, kIncomplete, kInvalid };

// Parses the message at the front of [data, data + size), refusing one over max_bytes.
// kComplete fills *out and *consumed; kIncomplete means more bytes are needed, and sets
// *needed (when given) to how many the message is known to take so far, so that a reader
// can size its buffer; kInvalid sets *error, and the bytes cannot be resynchronised.
ParseResult parse_message(const uint8_t* data, size_t size, Message* out, size_t* consumed,
                          std::string* error, size_t max_bytes = kMaxMessageBytes,
                          size_t* needed = nullptr);

// How many of a request's first fields are held to the key limit: all of them for CHECK,
// WAIT and WAIT_FOR (whose first field, the 8-byte timeout, is far within it).
size_t key_fields(Command c, size_t num_fields);

// Checks a complete TCPStore request: field counts, key lengths, the delta's width.
// Returns an empty string when it is well formed.
std::string validate_request(const Message& m);

void put_u32(Store::Bytes* out, uint32_t v);
uint32_t get_u32(const uint8_t* p);
Store::Bytes encode_i64(int64_t v);
int64_t get_i64(const uint8_t* p);

}  // namespace internal
}  // namespace distcomm
