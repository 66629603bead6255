// check_object_collectives (conformance.h).
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/object_collectives.h"
#include "tests/backends/conformance/conformance.h"

namespace distcomm {
namespace conformance {
namespace {

// Rank r's object: (37 r) % 101 bytes, so rank 0's is empty and the others differ in
// length, with a zero byte in the middle (objects are bytes, not C strings).
std::string object_of(int r) {
  std::string s(static_cast<size_t>((r * 37) % 101), static_cast<char>('a' + r % 26));
  if (!s.empty()) s[s.size() / 2] = '\0';
  return s;
}

std::vector<std::string> objects_of_all(int size, const std::string& suffix = "") {
  std::vector<std::string> all;
  for (int r = 0; r < size; ++r) all.push_back(object_of(r) + suffix);
  return all;
}

}  // namespace

void check_object_collectives(ProcessGroup& pg) {
  const int rank = pg.rank(), size = pg.size();

  EXPECT_EQ(all_gather_object(pg, object_of(rank)), objects_of_all(size)) << "rank " << rank;
  EXPECT_EQ(all_gather_object(pg, ""), std::vector<std::string>(static_cast<size_t>(size))) << "rank " << rank;
  // One long object: every rank's block is padded to it, and cut back.
  const std::string long_one(size_t{1} << 20 | 3, 'L');
  std::vector<std::string> with_long = objects_of_all(size);
  with_long[static_cast<size_t>(size - 1)] = long_one;
  EXPECT_EQ(all_gather_object(pg, rank == size - 1 ? long_one : object_of(rank)), with_long) << "rank " << rank;

  for (int root = 0; root < size; ++root) {
    std::string object = rank == root ? object_of(root) + "!" : "stale";
    broadcast_object(pg, object, root);
    EXPECT_EQ(object, object_of(root) + "!") << "rank " << rank << ", src " << root;
  }
  std::string emptied = rank == 0 ? "" : "stale";
  broadcast_object(pg, emptied, 0);
  EXPECT_EQ(emptied, "") << "rank " << rank;

  const int dst = size - 1;
  const std::vector<std::string> gathered = gather_object(pg, object_of(rank), dst);
  EXPECT_EQ(gathered, rank == dst ? objects_of_all(size) : std::vector<std::string>{}) << "rank " << rank;

  const int src = size > 1 ? 1 : 0;
  std::vector<std::string> to_scatter = rank == src ? objects_of_all(size, "#") : std::vector<std::string>{};
  EXPECT_EQ(scatter_object(pg, to_scatter, src), object_of(rank) + "#") << "rank " << rank;

  // A list of the wrong length on src: src's error on every rank, none left waiting.
  std::string what = "nothing";
  try {
    scatter_object(pg, rank == src ? std::vector<std::string>(static_cast<size_t>(size + 1), "x")
                                   : std::vector<std::string>{},
                   src);
  } catch (const InvalidArgument& e) {
    what = e.what();
  }
  EXPECT_NE(what.find("scatter_object: src (rank " + std::to_string(src) + ") gave " + std::to_string(size + 1) +
                      " objects; expected one per rank of the group, " + std::to_string(size)),
            std::string::npos)
      << "rank " << rank << ": " << what;
  // Out of range: refused here, before anything is sent (every rank calls it alike).
  std::string object = "kept";
  what = "nothing";
  try {
    broadcast_object(pg, object, size);
  } catch (const InvalidArgument& e) {
    what = e.what();
  }
  EXPECT_NE(what.find("broadcast_object: src " + std::to_string(size) + " is outside the group's ranks"),
            std::string::npos)
      << "rank " << rank << ": " << what;
  EXPECT_EQ(object, "kept");
  // And the group goes on.
  EXPECT_EQ(all_gather_object(pg, object_of(rank)), objects_of_all(size)) << "rank " << rank;
}

}  // namespace conformance
}  // namespace distcomm
