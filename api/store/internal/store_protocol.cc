#include "api/store/internal/store_protocol.h"

#include <algorithm>
#include <cstdint>

namespace distcomm {
namespace internal {

namespace {

constexpr size_t kKindBytes = 1;
constexpr size_t kU32Bytes = 4;
static_assert(sizeof(size_t) >= 8, "parse_message's bound checks assume a 64-bit size_t");

}  // namespace

bool is_command(uint8_t kind) {
  return (kind >= static_cast<uint8_t>(Command::kSet) && kind <= static_cast<uint8_t>(Command::kNumKeys)) ||
         kind == static_cast<uint8_t>(Command::kWaitFor) || kind == static_cast<uint8_t>(Command::kGetPresent);
}

const char* command_name(Command c) {
  switch (c) {
    case Command::kSet: return "SET";
    case Command::kGet: return "GET";
    case Command::kAdd: return "ADD";
    case Command::kCompareSet: return "COMPARE_SET";
    case Command::kCheck: return "CHECK";
    case Command::kWait: return "WAIT";
    case Command::kWaitFor: return "WAIT_FOR";
    case Command::kGetPresent: return "GET_PRESENT";
    case Command::kDelete: return "DELETE";
    case Command::kNumKeys: return "NUM_KEYS";
    case Command::kHello: return "HELLO";
    case Command::kProve: return "PROVE";
  }
  return "UNKNOWN";
}

void put_u32(Store::Bytes* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<uint8_t>(v >> (8 * i)));
}

uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

Store::Bytes encode_i64(int64_t v) {
  const auto u = static_cast<uint64_t>(v);
  Store::Bytes out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(u >> (8 * i)));
  return out;
}

int64_t get_i64(const uint8_t* p) {
  uint64_t u = 0;
  for (int i = 0; i < 8; ++i) u |= static_cast<uint64_t>(p[i]) << (8 * i);
  return static_cast<int64_t>(u);
}

Store::Bytes encode_message(uint8_t kind, const std::vector<FieldRef>& fields) {
  size_t total = kKindBytes + kU32Bytes;
  for (const auto& f : fields) total += kU32Bytes + f.size;
  Store::Bytes out;
  out.reserve(total);
  out.push_back(kind);
  put_u32(&out, static_cast<uint32_t>(fields.size()));
  for (const auto& f : fields) {
    put_u32(&out, static_cast<uint32_t>(f.size));
    out.insert(out.end(), f.data, f.data + f.size);
  }
  return out;
}

Store::Bytes encode_reply_header(Status status, size_t payload_bytes) {
  Store::Bytes out{static_cast<uint8_t>(status)};
  put_u32(&out, static_cast<uint32_t>(payload_bytes));
  return out;
}

ParseResult parse_message(const uint8_t* data, size_t size, Message* out, size_t* consumed,
                          std::string* error, size_t max_bytes, size_t* needed) {
  max_bytes = std::min(max_bytes, kMaxMessageBytes);
  // First walk the headers without copying, so that a message is only materialised once
  // all of it has arrived, and a bad length is refused before its bytes are waited for.
  auto incomplete = [&](size_t at_least) {
    if (needed) *needed = at_least;
    return ParseResult::kIncomplete;
  };
  if (size < kKindBytes + kU32Bytes) return incomplete(kKindBytes + kU32Bytes);
  const uint32_t count = get_u32(data + kKindBytes);
  if (count > kMaxFields) {
    *error = "field count " + std::to_string(count) + " exceeds " + std::to_string(kMaxFields);
    return ParseResult::kInvalid;
  }
  size_t pos = kKindBytes + kU32Bytes;
  for (uint32_t i = 0; i < count; ++i) {
    if (pos + kU32Bytes > max_bytes) {
      *error = "message exceeds " + std::to_string(max_bytes) + " bytes (" +
               std::to_string(count) + " fields)";
      return ParseResult::kInvalid;
    }
    if (size - pos < kU32Bytes) return incomplete(pos + kU32Bytes);
    const uint32_t len = get_u32(data + pos);
    // pos <= kMaxMessageBytes and len < 4 GiB: the sum cannot overflow a 64-bit size_t.
    if (pos + kU32Bytes + size_t{len} > max_bytes) {
      *error = "message exceeds " + std::to_string(max_bytes) + " bytes (field " +
               std::to_string(i) + " is " + std::to_string(len) + " bytes)";
      return ParseResult::kInvalid;
    }
    pos += kU32Bytes;
    if (size - pos < len) return incomplete(pos + len);
    pos += len;
  }

  out->kind = data[0];
  out->fields.clear();
  out->fields.reserve(count);
  size_t at = kKindBytes + kU32Bytes;
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t len = get_u32(data + at);
    at += kU32Bytes;
    out->fields.emplace_back(data + at, data + at + len);
    at += len;
  }
  *consumed = pos;
  return ParseResult::kComplete;
}

size_t key_fields(Command c, size_t num_fields) {
  if (c == Command::kCheck || c == Command::kWait || c == Command::kWaitFor || c == Command::kGetPresent) {
    return num_fields;
  }
  return std::min<size_t>(num_fields, 1);
}

std::string validate_request(const Message& m) {
  if (!is_command(m.kind)) return "unknown command " + std::to_string(m.kind);
  const auto cmd = static_cast<Command>(m.kind);
  const size_t n = m.fields.size();
  size_t expected = 0;
  switch (cmd) {
    case Command::kGet:
    case Command::kDelete: expected = 1; break;
    case Command::kSet:
    case Command::kAdd: expected = 2; break;
    case Command::kCompareSet: expected = 3; break;
    case Command::kNumKeys: expected = 0; break;
    case Command::kCheck:
    case Command::kWait:
    case Command::kGetPresent: expected = n; break;
    case Command::kWaitFor:
      if (n < 1 || m.fields[0].size() != 8) return "WAIT_FOR takes an 8-byte timeout, then keys";
      expected = n;
      break;
    case Command::kHello:
    case Command::kProve: return "the handshake is over";
  }
  if (n != expected) {
    return std::string(command_name(cmd)) + " takes " + std::to_string(expected) +
           " fields, got " + std::to_string(n);
  }
  for (size_t i = 0; i < key_fields(cmd, n); ++i) {
    if (m.fields[i].size() > kMaxKeyBytes) {
      return "key of " + std::to_string(m.fields[i].size()) + " bytes exceeds " +
             std::to_string(kMaxKeyBytes);
    }
  }
  if (cmd == Command::kAdd && m.fields[1].size() != 8) return "ADD delta is not 8 bytes";
  return "";
}

}  // namespace internal
}  // namespace distcomm
