#include "api/device_mesh.h"

#include <algorithm>
#include <set>

#include "api/errors.h"
#include "api/group/host_exchange.h"

namespace distcomm {
namespace {

std::string join(const std::vector<std::string>& items) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : ", ") + ("'" + item + "'");
  return "[" + text + "]";
}

std::string shape_text(const std::vector<int>& shape) {
  std::string text;
  for (int extent : shape) text += (text.empty() ? "" : ", ") + std::to_string(extent);
  return "{" + text + "}";
}

// What is wrong with a mesh's shape and names over `world_size` ranks ("" when nothing).
std::string mesh_error(const std::vector<int>& shape, const std::vector<std::string>& names, int world_size) {
  if (shape.empty()) return "'shape' is empty: a mesh has at least one dimension";
  if (names.size() != shape.size()) {
    return "'names' has " + std::to_string(names.size()) + " names for the " + std::to_string(shape.size()) +
           " dimensions of shape " + shape_text(shape);
  }
  int64_t product = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 1) return "shape " + shape_text(shape) + ": dimension '" + names[d] + "' has extent < 1";
    product *= shape[d];
    if (product > world_size) break;
  }
  if (product > world_size) {
    return "shape " + shape_text(shape) + " holds more than the group's " + std::to_string(world_size) + " ranks";
  }
  if (product < world_size) {
    return "shape " + shape_text(shape) + " holds " + std::to_string(product) + " ranks but the group has " +
           std::to_string(world_size);
  }
  std::set<std::string> seen;
  for (const auto& name : names) {
    if (name.empty()) return "'names' " + join(names) + " has an empty name";
    if (!seen.insert(name).second) return "'names' " + join(names) + " names '" + name + "' twice";
  }
  return "";
}

// Row-major index of `coord` restricted to `spans`, within extents `shape`.
int index_over(const std::vector<int>& coord, const std::vector<int>& spans, const std::vector<int>& shape) {
  int index = 0;
  for (int d : spans) index = index * shape[static_cast<size_t>(d)] + coord[static_cast<size_t>(d)];
  return index;
}

std::vector<int> coordinate_of(int rank, const std::vector<int>& shape) {
  std::vector<int> coord(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    coord[d] = rank % shape[d];
    rank /= shape[d];
  }
  return coord;
}

}  // namespace

DeviceMesh::DeviceMesh(ProcessGroupPtr world, std::vector<int> shape, std::vector<std::string> names,
                       const std::string& backend) {
  if (!world) throw InvalidArgument("DeviceMesh: 'world' is null");
  const std::string call = "DeviceMesh over group '" + world->name() + "'";
  // Refused in the mesh's own round, the first a rank that aborted would otherwise leave on
  // its abort, its peers then waiting for it in split_group's round until their timeout.
  world->refuse_if_fork_child("DeviceMesh");  // before the refusal could post to the parent's round
  world->refuse_subgroup_if_aborted(call);
  // Checked on every rank together: a rank with another shape fails them all at once.
  agree_on_arguments(world->exchange(), call, mesh_error(shape, names, world->size()),
                     "shape " + shape_text(shape) + " names " + join(names) +
                         (backend.empty() ? "" : " backend " + backend));
  auto layout = std::make_shared<Layout>();
  layout->world = std::move(world);
  layout->backend = backend;
  layout->names = names;
  layout->shape = std::move(shape);
  for (size_t d = 0; d < names.size(); ++d) {
    const std::vector<int> spans{static_cast<int>(d)};
    layout->dims[names[d]] = Layout::Dim{spans, make_group(*layout, spans)};
  }
  layout_ = std::move(layout);
  dims_ = std::move(names);
}

DeviceMesh::DeviceMesh(std::shared_ptr<Layout> layout, std::vector<std::string> dims)
    : layout_(std::move(layout)), dims_(std::move(dims)) {}

ProcessGroupPtr DeviceMesh::make_group(const Layout& layout, const std::vector<int>& spans) {
  std::vector<int> others;
  for (int d = 0; d < static_cast<int>(layout.shape.size()); ++d) {
    if (std::find(spans.begin(), spans.end(), d) == spans.end()) others.push_back(d);
  }
  int lists = 1, members = 1;
  for (int d : others) lists *= layout.shape[static_cast<size_t>(d)];
  for (int d : spans) members *= layout.shape[static_cast<size_t>(d)];
  std::vector<std::vector<int>> split_ranks(static_cast<size_t>(lists), std::vector<int>(static_cast<size_t>(members)));
  for (int r = 0; r < layout.world->size(); ++r) {
    const std::vector<int> coord = coordinate_of(r, layout.shape);
    split_ranks[static_cast<size_t>(index_over(coord, others, layout.shape))]
               [static_cast<size_t>(index_over(coord, spans, layout.shape))] = r;
  }
  return layout.world->split_group(split_ranks, layout.backend);
}

const DeviceMesh::Layout::Dim& DeviceMesh::dim(const std::string& name) const {
  std::lock_guard<std::mutex> lock(layout_->mu);
  const auto it = layout_->dims.find(name);
  if (it == layout_->dims.end() || std::find(dims_.begin(), dims_.end(), name) == dims_.end()) {
    throw InvalidArgument(where() + " has no dimension '" + name + "'; it has " + join(dims_));
  }
  return it->second;
}

std::string DeviceMesh::where() const {
  return "rank " + std::to_string(layout_->world->rank()) + ": the mesh " + join(dims_) + " over group '" +
         layout_->world->name() + "'";
}

std::vector<int> DeviceMesh::shape() const {
  std::vector<int> extents;
  for (const auto& name : dims_) extents.push_back(size(name));
  return extents;
}

int DeviceMesh::size(const std::string& name) const {
  int extent = 1;
  for (int d : dim(name).spans) extent *= layout_->shape[static_cast<size_t>(d)];
  return extent;
}

int DeviceMesh::size() const {
  int total = 1;
  for (const auto& name : dims_) total *= size(name);
  return total;
}

std::vector<int> DeviceMesh::coordinate() const {
  std::vector<int> coord;
  for (const auto& name : dims_) coord.push_back(local_rank(name));
  return coord;
}

int DeviceMesh::local_rank(const std::string& name) const {
  const std::vector<int> world_coord = coordinate_of(layout_->world->rank(), layout_->shape);
  return index_over(world_coord, dim(name).spans, layout_->shape);
}

const ProcessGroupPtr& DeviceMesh::group(const std::string& name) const { return dim(name).group; }

std::vector<int> DeviceMesh::ranks() const {
  // This rank's world coordinate with this mesh's dimensions varied, row-major.
  std::vector<int> spans;
  for (const auto& name : dims_) {
    for (int d : dim(name).spans) spans.push_back(d);
  }
  const std::vector<int> mine = coordinate_of(layout_->world->rank(), layout_->shape);
  std::vector<int> out;
  for (int r = 0; r < layout_->world->size(); ++r) {
    const std::vector<int> coord = coordinate_of(r, layout_->shape);
    bool same_elsewhere = true;
    for (size_t d = 0; d < coord.size(); ++d) {
      const bool spanned = std::find(spans.begin(), spans.end(), static_cast<int>(d)) != spans.end();
      if (!spanned && coord[d] != mine[d]) same_elsewhere = false;
    }
    if (same_elsewhere) out.push_back(r);
  }
  // Ascending world rank is row-major over the world's dimensions; reorder to this mesh's.
  std::sort(out.begin(), out.end(), [&](int a, int b) {
    return index_over(coordinate_of(a, layout_->shape), spans, layout_->shape) <
           index_over(coordinate_of(b, layout_->shape), spans, layout_->shape);
  });
  // World ranks, as PyTorch's mesh holds them: a mesh made over a subgroup says which
  // processes it spans, not their places in that subgroup.
  for (int& r : out) r = layout_->world->global_rank(r);
  return out;
}

DeviceMesh DeviceMesh::operator[](const std::string& name) const { return slice({name}); }

DeviceMesh DeviceMesh::slice(const std::vector<std::string>& names) const {
  if (names.empty()) throw InvalidArgument(where() + ": slice of no dimension");
  std::set<int> spanned;
  std::lock_guard<std::mutex> lock(layout_->mu);
  // What this mesh spans: a slice takes dimensions within it only (mesh["tp"]["dp"] is no
  // sub-mesh of mesh["tp"]).
  std::set<int> own;
  for (const auto& name : dims_) {
    for (int d : layout_->dims.at(name).spans) own.insert(d);
  }
  for (const auto& name : names) {
    const auto it = layout_->dims.find(name);
    if (it == layout_->dims.end()) {
      std::vector<std::string> known;
      for (const auto& entry : layout_->dims) known.push_back(entry.first);
      throw InvalidArgument(where() + ": slice " + join(names) + " names '" + name + "', which is none of " +
                            join(known));
    }
    for (int d : it->second.spans) {
      if (!own.count(d)) {
        throw InvalidArgument(where() + ": slice " + join(names) + " names '" + name +
                              "', which spans dimensions outside this mesh");
      }
      if (!spanned.insert(d).second) {
        throw InvalidArgument(where() + ": slice " + join(names) + " covers dimension '" +
                              layout_->names[static_cast<size_t>(d)] + "' twice");
      }
    }
  }
  return DeviceMesh(layout_, names);
}

DeviceMesh DeviceMesh::flatten(const std::string& name) const {
  std::vector<int> spans;
  for (const auto& own : dims_) {
    for (int d : dim(own).spans) spans.push_back(d);
  }
  std::string error;
  if (name.empty()) error = "the flattened dimension's name is empty";
  if (std::lock_guard<std::mutex> lock(layout_->mu); layout_->dims.count(name)) {
    error = "the name '" + name + "' is taken";
  }
  const std::string call = "DeviceMesh::flatten over group '" + layout_->world->name() + "'";
  layout_->world->refuse_if_fork_child("DeviceMesh::flatten");  // as the constructor
  layout_->world->refuse_subgroup_if_aborted(call);
  agree_on_arguments(layout_->world->exchange(), call, error, "'" + name + "' of " + join(dims_));
  // A one-dimension mesh's group already holds the ranks: no new group.
  ProcessGroupPtr group = dims_.size() == 1 ? dim(dims_.front()).group : make_group(*layout_, spans);
  std::lock_guard<std::mutex> lock(layout_->mu);
  // Never over an entry: a group() reference to it may be held.
  if (!layout_->dims.emplace(name, Layout::Dim{spans, std::move(group)}).second) {
    throw InvalidArgument(where() + ": flatten: the name '" + name + "' was taken meanwhile");
  }
  return DeviceMesh(layout_, {name});
}

}  // namespace distcomm
