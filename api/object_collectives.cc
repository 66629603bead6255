#include "api/object_collectives.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "api/errors.h"
#include "api/group/host_exchange.h"
#include "api/tensor.h"

namespace distcomm {
namespace {

// "rank 1/4 group 'world': broadcast_object" -- as the group's own ops begin their errors.
std::string where(const ProcessGroup& pg, const char* fn) {
  return "rank " + std::to_string(pg.rank()) + "/" + std::to_string(pg.size()) + " group '" + pg.name() + "': " + fn;
}

// Runs an object collective's body; memory the host cannot give for it (its buffers, the
// lengths, the strings returned, or the op's own packing) is refused naming the rank, the
// group and the collective, of the same type: a std::bad_alloc (TensorAllocationError),
// whose message said only "cannot allocate N bytes ... for uint8[N] on cpu".
template <typename Body>
auto with_allocation_context(const ProcessGroup& pg, const char* fn, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::bad_alloc& e) {
    const std::string context = where(pg, fn);
    const std::string what = e.what();
    if (what.rfind(context, 0) == 0) throw;
    throw TensorAllocationError(
        context + ": " +
        (dynamic_cast<const TensorAllocationError*>(&e) ? what : "cannot allocate host memory (" + what + ")"));
  }
}

void check_rank(const ProcessGroup& pg, const char* fn, const char* arg, int r) {
  if (r < 0 || r >= pg.size()) {
    throw InvalidArgument(where(pg, fn) + ": " + arg + " " + std::to_string(r) + " is outside the group's ranks [0, " +
                          std::to_string(pg.size() - 1) + "]");
  }
}

int64_t longest(const Tensor& lengths) {
  const auto* l = static_cast<const int64_t*>(lengths.data());
  return lengths.numel() == 0 ? 0 : *std::max_element(l, l + lengths.numel());
}

// `object` in a block of `width` bytes, the rest zero (no stale memory leaves the process).
void fill_block(uint8_t* block, const std::string& object, int64_t width) {
  std::memcpy(block, object.data(), object.size());
  std::memset(block + object.size(), 0, static_cast<size_t>(width) - object.size());
}

Tensor padded(const std::string& object, int64_t width) {
  Tensor t = Tensor::empty({width}, DType::kUInt8);
  fill_block(static_cast<uint8_t*>(t.data()), object, width);
  return t;
}

// Every rank's object length, in rank order.
Tensor all_lengths(ProcessGroup& pg, const std::string& object, std::chrono::milliseconds timeout) {
  Tensor mine = Tensor::of({static_cast<int64_t>(object.size())});
  Tensor lengths = Tensor::empty({pg.size()}, DType::kInt64);
  AllGatherOptions o;
  o.timeout = timeout;
  pg.all_gather_into_tensor(lengths, mine, o)->wait();
  return lengths;
}

// The blocks of `bytes` (size() of `width` each) cut to `lengths`.
std::vector<std::string> unpadded(const Tensor& bytes, const Tensor& lengths, int64_t width) {
  const auto* b = static_cast<const char*>(bytes.data());
  const auto* l = static_cast<const int64_t*>(lengths.data());
  std::vector<std::string> objects;
  objects.reserve(static_cast<size_t>(lengths.numel()));
  for (int64_t r = 0; r < lengths.numel(); ++r) objects.emplace_back(b + r * width, static_cast<size_t>(l[r]));
  return objects;
}

}  // namespace

std::vector<std::string> all_gather_object(ProcessGroup& pg, const std::string& object,
                                           std::chrono::milliseconds timeout) {
  AllGatherOptions o;
  o.timeout = timeout;
  return with_allocation_context(pg, "all_gather_object", [&] {
    return all_gather_strings(pg.size(), object, [&](Tensor& out, const Tensor& in) {
      pg.all_gather_into_tensor(out, in, o)->wait();
    });
  });
}

namespace {

void broadcast_object_impl(ProcessGroup& pg, std::string& object, int src, std::chrono::milliseconds timeout) {
  check_rank(pg, "broadcast_object", "src", src);
  const bool sender = pg.rank() == src;
  Tensor length = Tensor::of({sender ? static_cast<int64_t>(object.size()) : int64_t{0}});
  BroadcastOptions o;
  o.root = src;
  o.timeout = timeout;
  pg.broadcast(length, o)->wait();
  const int64_t n = *static_cast<const int64_t*>(length.data());
  if (sender) {
    if (n == 0) return;
    Tensor bytes = Tensor::from_blob(object.data(), {n}, DType::kUInt8);
    pg.broadcast(bytes, o)->wait();
    return;
  }
  // Into a string of its own: a broadcast that fails leaves the caller's as it was.
  std::string received(static_cast<size_t>(n), '\0');
  if (n > 0) {
    Tensor bytes = Tensor::from_blob(received.data(), {n}, DType::kUInt8);
    pg.broadcast(bytes, o)->wait();
  }
  object.swap(received);
}

std::vector<std::string> gather_object_impl(ProcessGroup& pg, const std::string& object, int dst,
                                            std::chrono::milliseconds timeout) {
  check_rank(pg, "gather_object", "dst", dst);
  const Tensor lengths = all_lengths(pg, object, timeout);
  const int64_t width = longest(lengths);
  const bool receiver = pg.rank() == dst;
  if (width == 0) return receiver ? std::vector<std::string>(static_cast<size_t>(pg.size())) : std::vector<std::string>{};
  // One buffer on dst, its blocks handed to gather as views (the core then gathers into it).
  Tensor all = Tensor::empty({receiver ? width * pg.size() : 0}, DType::kUInt8);
  std::vector<Tensor> blocks;
  if (receiver) {
    for (int r = 0; r < pg.size(); ++r) {
      blocks.push_back(Tensor::from_blob(static_cast<uint8_t*>(all.data()) + r * width, {width}, DType::kUInt8));
    }
  }
  GatherOptions o;
  o.root = dst;
  o.timeout = timeout;
  pg.gather(blocks, padded(object, width), o)->wait();
  return receiver ? unpadded(all, lengths, width) : std::vector<std::string>{};
}

std::string scatter_object_impl(ProcessGroup& pg, const std::vector<std::string>& objects, int src,
                                std::chrono::milliseconds timeout) {
  check_rank(pg, "scatter_object", "src", src);
  const bool sender = pg.rank() == src;
  const int size = pg.size();
  // The lengths go from src to every rank; a list of the wrong length goes out as lengths of
  // -1 - its length, so that every rank fails with src's error rather than wait for bytes.
  Tensor lengths = Tensor::empty({size}, DType::kInt64);
  auto* l = static_cast<int64_t*>(lengths.data());
  if (sender) {
    const bool valid = objects.size() == static_cast<size_t>(size);
    for (int r = 0; r < size; ++r) {
      l[r] = valid ? static_cast<int64_t>(objects[static_cast<size_t>(r)].size())
                   : -1 - static_cast<int64_t>(objects.size());
    }
  }
  BroadcastOptions o;
  o.root = src;
  o.timeout = timeout;
  pg.broadcast(lengths, o)->wait();
  if (l[0] < 0) {
    throw InvalidArgument(where(pg, "scatter_object") + ": src (rank " + std::to_string(src) + ") gave " +
                          std::to_string(-1 - l[0]) + " objects; expected one per rank of the group, " +
                          std::to_string(size));
  }
  const int64_t width = longest(lengths);
  if (width == 0) return "";
  // src's objects, padded, in one buffer whose blocks scatter sends as views.
  Tensor all = Tensor::empty({sender ? width * size : 0}, DType::kUInt8);
  std::vector<Tensor> blocks;
  if (sender) {
    for (int r = 0; r < size; ++r) {
      uint8_t* block = static_cast<uint8_t*>(all.data()) + r * width;
      fill_block(block, objects[static_cast<size_t>(r)], width);
      blocks.push_back(Tensor::from_blob(block, {width}, DType::kUInt8));
    }
  }
  Tensor mine = Tensor::empty({width}, DType::kUInt8);
  ScatterOptions s;
  s.root = src;
  s.timeout = timeout;
  pg.scatter(mine, blocks, s)->wait();
  return std::string(static_cast<const char*>(mine.data()), static_cast<size_t>(l[pg.rank()]));
}

}  // namespace

void broadcast_object(ProcessGroup& pg, std::string& object, int src, std::chrono::milliseconds timeout) {
  with_allocation_context(pg, "broadcast_object", [&] { broadcast_object_impl(pg, object, src, timeout); });
}

std::vector<std::string> gather_object(ProcessGroup& pg, const std::string& object, int dst,
                                       std::chrono::milliseconds timeout) {
  return with_allocation_context(pg, "gather_object", [&] { return gather_object_impl(pg, object, dst, timeout); });
}

std::string scatter_object(ProcessGroup& pg, const std::vector<std::string>& objects, int src,
                           std::chrono::milliseconds timeout) {
  return with_allocation_context(pg, "scatter_object", [&] { return scatter_object_impl(pg, objects, src, timeout); });
}

}  // namespace distcomm
