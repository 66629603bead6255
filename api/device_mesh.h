// DeviceMesh: the ranks of a group laid out as an N-dimensional array, with a group per
// dimension, for 2-D (and more) parallelism: data parallel along one dimension, tensor or
// pipeline parallel along another (torch.distributed.device_mesh's model).
//
//   DeviceMesh mesh(world, {2, 4}, {"dp", "tp"});   // collective over `world`
//   mesh.group("tp")->all_reduce(t);                 // among the 4 ranks of my "dp" row
//   mesh.coordinate();                               // {1, 3} on world rank 7
//   DeviceMesh tp = mesh["tp"];                       // a 1-D mesh: my row
//   DeviceMesh flat = mesh.flatten("dp_tp");          // one dimension over both (collective)
//
// Ranks sit in row-major order: world rank r is at the coordinate whose row-major index is
// r, so the last dimension's groups are runs of consecutive ranks (put the dimension whose
// traffic is heaviest last: consecutive ranks usually share a host). The per-dimension
// groups are made once, when the mesh is made (split_group: one call per dimension, every
// rank of the world taking part, so each backend can split its own resources, as NCCL's
// ncclCommSplit does). Slicing makes no group; flatten makes one, collectively.
//
// A mesh is a value: copies and slices share the groups, which live as long as any mesh
// that holds them. Its methods may be called from several threads; flatten, being
// collective, follows the rules of group creation (same order on every rank).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/process_group.h"

namespace distcomm {

class DeviceMesh {
 public:
  // Collective over `world` (every rank calls it, in the same order as its other group
  // creations). shape: the extent of every dimension, each >= 1, whose product is
  // world->size(); names: one per dimension, distinct, non-empty. InvalidArgument on every
  // rank, naming the argument, what was expected and the rank that gave it, before any
  // group is made (one exchange round compares the ranks' arguments). backend: the groups'
  // backend spec ("" as the world's).
  DeviceMesh(ProcessGroupPtr world, std::vector<int> shape, std::vector<std::string> names,
             const std::string& backend = "");

  int ndim() const { return static_cast<int>(dims_.size()); }
  const std::vector<std::string>& names() const { return dims_; }
  // Extents of this mesh's dimensions, in order.
  std::vector<int> shape() const;
  // Extent of one dimension (InvalidArgument for a name this mesh does not have).
  int size(const std::string& dim) const;
  // Ranks in this mesh (the product of its extents).
  int size() const;
  // This rank's index along each of this mesh's dimensions.
  std::vector<int> coordinate() const;
  // This rank's index along one dimension: its rank in group(dim).
  int local_rank(const std::string& dim) const;
  // The group along one dimension: the ranks that share this rank's coordinate on every
  // other dimension of the world's mesh, ordered along `dim`.
  const ProcessGroupPtr& group(const std::string& dim) const;
  // This mesh's ranks, row-major, as world ranks (global_ranks of the group the mesh was
  // made over: the group's own ranks where that is the world).
  std::vector<int> ranks() const;

  // The sub-mesh of the given dimensions (in the order given) through this rank: no group
  // is made, the sub-mesh uses this mesh's. A name may be a dimension made by flatten(); it
  // must lie within this mesh's dimensions, each covered once.
  DeviceMesh operator[](const std::string& dim) const;
  DeviceMesh slice(const std::vector<std::string>& dims) const;

  // One dimension `name` over all of this mesh's dimensions, row-major: a 1-D mesh whose
  // group holds this mesh's ranks. Collective over the world (every rank of it calls
  // flatten on its own slice of the same dimensions). The new dimension is then known to
  // every mesh sharing the world's (mesh["dp_tp"]). InvalidArgument when the name is taken.
  DeviceMesh flatten(const std::string& name) const;

 private:
  // What every mesh over one world shares: the world's layout and every group made.
  struct Layout {
    ProcessGroupPtr world;
    std::string backend;
    std::vector<std::string> names;  // the world mesh's dimensions
    std::vector<int> shape;
    // A dimension (the world's, or one flatten() made) -> the world dimensions it spans,
    // and the group along it.
    struct Dim {
      std::vector<int> spans;  // indices into names/shape, in order
      ProcessGroupPtr group;
    };
    std::map<std::string, Dim> dims;  // entries are never removed: references stay valid
    mutable std::mutex mu;              // guards dims (flatten adds to it)
  };
  DeviceMesh(std::shared_ptr<Layout> layout, std::vector<std::string> dims);
  const Layout::Dim& dim(const std::string& name) const;
  // The group along `spans` (world dimensions, row-major among them): split_group over the
  // world, one list per setting of the other world dimensions.
  static ProcessGroupPtr make_group(const Layout& layout, const std::vector<int>& spans);
  std::string where() const;

  std::shared_ptr<Layout> layout_;
  std::vector<std::string> dims_;  // this mesh's dimensions, names in layout_->dims
};

}  // namespace distcomm
