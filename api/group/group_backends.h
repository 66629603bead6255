// The backends of one group, one per device type it serves, as its creation made them, and
// the one gate every op passes before a backend's virtual is called (route).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/plugin/backend.h"

namespace distcomm {

struct GroupBackend {
  std::unique_ptr<Backend> backend;
  std::string plugin;                 // the plugin it came from
  uint32_t abi_minor = 0;             // that plugin's ABI minor (plugin.h)
  std::vector<OpType> supported_ops;  // asked once, not per op
  std::vector<OpType> list_ops;       // ABI 1.6 (Backend::list_ops): asked once, where the plugin has it
};

class GroupBackends {
 public:
  // what: "group 'world' (backend 'gloo')", for messages.
  explicit GroupBackends(std::string what) : what_(std::move(what)) {}
  GroupBackends(GroupBackends&&) = default;
  GroupBackends& operator=(GroupBackends&&) = delete;
  // Shuts down what it holds (Backend::shutdown is idempotent): a backend made before a
  // later one of the same group failed to be created is stopped too, not just deleted.
  ~GroupBackends() { shutdown(); }

  void add(DeviceType device, GroupBackend backend) { by_device_[device] = std::move(backend); }
  // Serves `device` with what `wrap` makes of its backend (the hierarchy wraps a group's
  // flat CPU backend, hierarchical_backend.h); plugin, ABI and ops stay the backend's.
  void wrap(DeviceType device, const std::function<std::unique_ptr<Backend>(std::unique_ptr<Backend>)>& wrap);
  // In a mixed group ("cpu:gloo,cuda:nccl") a backend that cannot run here (no GPU) fails
  // the ops of its device only, as c10d's lazy backends do.
  void add_unavailable(DeviceType device, std::string why) { unavailable_[device] = std::move(why); }
  // A device type the spec did not name and a built-in name ("auto") chose not to serve,
  // for a stated reason: its ops stay InvalidArgument (the group has no backend for them),
  // now with the reason after it.
  void add_left_out(DeviceType device, std::string why) { left_out_[device] = std::move(why); }

  const std::map<DeviceType, GroupBackend>& all() const { return by_device_; }
  bool empty() const { return by_device_.empty(); }
  const GroupBackend* find(DeviceType device) const;
  // The backend serving a device type: BackendUnavailable with the reason it could not be
  // created, InvalidArgument when the group serves no such device.
  Backend& serving(DeviceType device) const;
  // The same, its errors said as op's, as every op's are ("rank 1/4 group 'world'
  // batch_isend_irecv: ..."): for an op that needs the backend but not its listing of op
  // (a batch goes one by one to a backend that does not batch natively).
  Backend& serving(DeviceType device, OpType op, const std::string& where_prefix) const;
  // The backend of the device, once it lists op in supported_ops() (Unsupported otherwise):
  // a plugin built before an op was added has no virtual for it, and cannot list it
  // (plugin.h, the ABI rules). where_prefix: "rank 1/4 group 'world' ", which errors
  // complete with the op's name (built only then: every op passes here).
  Backend& route(OpType op, DeviceType device, const std::string& where_prefix) const;
  bool lists(DeviceType device, OpType op) const;
  // Whether the device's backend takes op's list form whole (Backend::list_ops).
  bool takes_lists(DeviceType device, OpType op) const;

  // Fails what is in flight and stops each backend (Backend::abort is ABI 1.4: an older
  // plugin's vtable has no such slot, so it is shut down instead).
  void abort();
  void shutdown();

 private:
  std::string what_;
  std::map<DeviceType, GroupBackend> by_device_;
  std::map<DeviceType, std::string> unavailable_;
  std::map<DeviceType, std::string> left_out_;
};

}  // namespace distcomm
