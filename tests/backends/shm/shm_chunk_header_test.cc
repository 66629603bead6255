// A peer's p2p chunk header says where its bytes go in the receiver's buffer (offset, size,
// message size, dtype). A broken or hostile peer must not turn that into a write outside
// the buffer: the receiver checks every header against the message it continues and the
// receive it fills, and refuses a corrupt one with an error naming the sender, before a
// byte is copied.
//
// The sender here is real: rank 1 sends, then (as a broken peer would) rewrites the header
// of its chunk in its own segment before rank 0 has looked at it (rank 0 reads its peers'
// rings only while it has a transfer pending). Rank 0's buffer sits between two canaries.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "backends/shm/shm_layout.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using shm::ChunkHeader;
using std::chrono::milliseconds;
using testing::run_group;

constexpr int64_t kCount = 1024;  // 4 KiB of float32: one chunk
constexpr uint64_t kBytes = kCount * 4;
constexpr int64_t kCanary = 16 * 1024;  // floats each side: more than a chunk
constexpr float kCanaryValue = -7.0f;

// Every mapping of `group`'s rank `rank` segment in this process: [start, end).
std::vector<std::pair<uint8_t*, uint8_t*>> segment_mappings(const std::string& group, int rank) {
  std::vector<std::pair<uint8_t*, uint8_t*>> found;
  std::ifstream maps("/proc/self/maps");
  const std::string name = "memfd:distcomm-shm-" + group + "-rank" + std::to_string(rank) + " ";
  for (std::string line; std::getline(maps, line);) {
    if ((line + " ").find(name) == std::string::npos) continue;
    uintptr_t start = 0, end = 0;
    char dash = 0;
    std::istringstream(line) >> std::hex >> start >> dash >> end;
    found.emplace_back(reinterpret_cast<uint8_t*>(start), reinterpret_cast<uint8_t*>(end));
  }
  return found;
}

// The header of this rank's chunk carrying the message with `tag` (chunk headers start
// 128-byte lines of the rings).
ChunkHeader* find_chunk_header(const std::string& group, int rank, int tag) {
  for (const auto& [start, end] : segment_mappings(group, rank)) {
    for (uint8_t* p = start; p + sizeof(ChunkHeader) <= end; p += shm::kLineBytes) {
      auto* h = reinterpret_cast<ChunkHeader*>(p);
      if (h->tag == tag && h->message_bytes == kBytes && h->offset == 0 && h->bytes == kBytes) return h;
    }
  }
  return nullptr;
}

struct Corruption {
  std::string what;
  std::function<void(ChunkHeader&)> apply;
};

TEST(ShmChunkHeader, ACorruptHeaderIsRefusedAndNothingIsWritten) {
  const std::vector<Corruption> corruptions = {
      {"offset past the buffer", [](ChunkHeader& h) { h.offset = kBytes; }},
      {"more bytes than a chunk holds", [](ChunkHeader& h) { h.bytes = 20000; }},
      {"a dtype that does not exist", [](ChunkHeader& h) { h.dtype = 200; }},
      {"a message size the chunk does not match", [](ChunkHeader& h) { h.message_bytes = uint64_t{1} << 40; }},
  };
  run_group(2, "shm", [&](ProcessGroup& world) {
    for (size_t i = 0; i < corruptions.size(); ++i) {
      const Corruption& c = corruptions[i];
      ProcessGroupPtr pg = world.new_group({0, 1});
      const std::string group = "world/g" + std::to_string(i);
      const int tag = 4242 + static_cast<int>(i);
      const std::string corrupted = "test/corrupted/" + std::to_string(i);
      if (pg->rank() == 1) {
        Tensor message = Tensor::empty({kCount});
        message.fill(1.0f);
        P2POptions o;
        o.tag = tag;
        pg->send(message, 0, o)->wait();  // in the ring, not read yet
        ChunkHeader* h = find_chunk_header(group, 1, tag);
        ASSERT_NE(h, nullptr) << "no chunk with tag " << tag << " in " << group;
        c.apply(*h);
        world.store()->set(corrupted, "1");
        world.store()->wait({"test/checked/" + std::to_string(i)}, milliseconds(30000));
        continue;
      }
      std::vector<float> memory(static_cast<size_t>(kCanary + kCount + kCanary), kCanaryValue);
      float* buffer = memory.data() + kCanary;
      std::fill_n(buffer, kCount, 0.0f);
      Tensor into = Tensor::from_blob(buffer, {kCount}, DType::kFloat32);
      world.store()->wait({corrupted}, milliseconds(30000));
      P2POptions o;
      o.tag = tag;
      try {
        pg->recv(into, 1, o)->wait();
        ADD_FAILURE() << c.what << ": the receive succeeded";
      } catch (const InvalidArgument& e) {
        ADD_FAILURE() << c.what << ": taken for a size mismatch, not refused as corrupt: " << e.what();
      } catch (const Error& e) {
        const std::string msg = e.what();
        std::fprintf(stderr, "[%s] %s\n", c.what.c_str(), msg.c_str());
        EXPECT_NE(msg.find("corrupt"), std::string::npos) << c.what << ": " << msg;
        EXPECT_NE(msg.find("rank 1"), std::string::npos) << c.what << ": " << msg;
      }
      for (int64_t k = 0; k < kCanary; ++k) {
        ASSERT_EQ(memory[static_cast<size_t>(k)], kCanaryValue) << c.what << ": written before the buffer";
        ASSERT_EQ(memory[static_cast<size_t>(kCanary + kCount + k)], kCanaryValue)
            << c.what << ": written after the buffer";
      }
      for (int64_t k = 0; k < kCount; ++k) ASSERT_EQ(buffer[k], 0.0f) << c.what << ": written into the buffer";
      world.store()->set("test/checked/" + std::to_string(i), "1");
    }
  });
}

}  // namespace
}  // namespace distcomm
