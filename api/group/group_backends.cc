#include "api/group/group_backends.h"

#include <algorithm>

#include "api/errors.h"

namespace distcomm {

const GroupBackend* GroupBackends::find(DeviceType device) const {
  auto it = by_device_.find(device);
  return it == by_device_.end() ? nullptr : &it->second;
}

Backend& GroupBackends::serving(DeviceType device) const {
  if (const GroupBackend* b = find(device)) return *b->backend;
  auto err = unavailable_.find(device);
  if (err != unavailable_.end()) throw BackendUnavailable(err->second);
  auto left = left_out_.find(device);
  throw InvalidArgument(what_ + " has no backend for " + device_type_name(device) + " tensors" +
                        (left == left_out_.end() ? std::string() : ": " + left->second));
}

Backend& GroupBackends::serving(DeviceType device, OpType op, const std::string& where_prefix) const {
  try {
    return serving(device);
  } catch (const Error&) {
    std::rethrow_exception(with_context(std::current_exception(), where_prefix + op_type_name(op)));
  }
}

Backend& GroupBackends::route(OpType op, DeviceType device, const std::string& where_prefix) const {
  // One look-up for both questions (every op passes here); serving() throws where none is found.
  const GroupBackend* found = find(device);
  Backend* b = found ? found->backend.get() : &serving(device, op, where_prefix);
  if (!found || std::find(found->supported_ops.begin(), found->supported_ops.end(), op) == found->supported_ops.end()) {
    throw Unsupported(where_prefix + op_type_name(op) + ": backend " + b->name() + " does not support " +
                      op_type_name(op));
  }
  return *b;
}

bool GroupBackends::lists(DeviceType device, OpType op) const {
  const GroupBackend* b = find(device);
  return b && std::find(b->supported_ops.begin(), b->supported_ops.end(), op) != b->supported_ops.end();
}

bool GroupBackends::takes_lists(DeviceType device, OpType op) const {
  const GroupBackend* b = find(device);
  return b && std::find(b->list_ops.begin(), b->list_ops.end(), op) != b->list_ops.end();
}

void GroupBackends::wrap(DeviceType device,
                         const std::function<std::unique_ptr<Backend>(std::unique_ptr<Backend>)>& wrap) {
  GroupBackend& b = by_device_.at(device);
  b.backend = wrap(std::move(b.backend));
}

void GroupBackends::abort() {
  for (auto& [device, b] : by_device_) {
    if (b.abi_minor >= 4) {
      b.backend->abort();
    } else {
      b.backend->shutdown();
    }
  }
}

void GroupBackends::shutdown() {
  for (auto& [device, b] : by_device_) b.backend->shutdown();
}

}  // namespace distcomm
