// EXAMPLE CODE: checkpoints of a training run, one file per checkpoint, tensors by name.
// (libtorch programs use torch::save / torch::load instead.)
//
// The format, version 2, little-endian as the host writes it:
//
//   distcomm-checkpoint 2\n
//   step <N>\n                                   steps completed when it was written
//   tensors <K>\n
//   then K times:
//     <name> <dtype> <ndim> <d0> ... <d(ndim-1)> <nbytes> <crc32c>\n
//         e.g. "fc0.weight float32 2 128 16 8192 1f2e3d4c" (crc32c: of the raw bytes, 8 hex digits)
//     <nbytes raw bytes>\n
//   end\n
//
// Names hold no blank. A file lacking its "end" line (a writer killed halfway, a full disk)
// is refused by read_checkpoint, and so is one whose tensor bytes do not match their
// checksum (a bit flipped on the disk or in a copy, a block overwritten): the run must not
// resume from weights nobody wrote. Version 1 files (the same without the checksum) are
// still read, unchecked. The files are named step_<N, 10 digits>.ckpt, so that the
// newest is the one with the largest step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <distcomm/api/tensor.h>

namespace examples {

struct Checkpoint {
  int64_t step = 0;
  std::vector<std::pair<std::string, distcomm::Tensor>> tensors;  // in the order written

  // The tensor of that name; throws std::runtime_error naming the file's names if none.
  const distcomm::Tensor& at(const std::string& name) const;
};

// "<dir>/step_0000000120.ckpt"
std::string checkpoint_path(const std::string& dir, int64_t step);

// Writes the checkpoint atomically: into a temporary file in the same folder, flushed to
// disk (fsync), then renamed over checkpoint_path(dir, step), and the folder synced. A
// reader sees the old state or the new one, never half a file, even if the writer is
// killed at any point (it may then leave a "*.tmp" file, which remove_temporary_files
// deletes). Creates dir, and the folders above it, if needed. Throws std::runtime_error
// naming the path.
void write_checkpoint(const std::string& dir, const Checkpoint& checkpoint);

// Reads one file. Throws std::runtime_error naming the path and what is wrong.
Checkpoint read_checkpoint(const std::string& path);

// The checkpoint with the largest step in dir that reads cleanly (a damaged one is skipped,
// saying so on stderr), or nothing when dir holds none.
std::optional<Checkpoint> newest_checkpoint(const std::string& dir);

// Deletes what writers killed halfway left in dir. Only when no writer is running.
void remove_temporary_files(const std::string& dir);

// Deletes every checkpoint in dir but the `keep` of the largest steps (keep <= 0: none is
// deleted): a run that checkpoints every step would otherwise fill the disk. More than one
// is kept so that a damaged newest file still leaves one to resume from.
void remove_older_checkpoints(const std::string& dir, int keep);

}  // namespace examples
