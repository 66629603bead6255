// EXAMPLE CODE: checkpoints of a training run, one file per checkpoint, tensors by name.
// (libtorch programs use torch::save / torch::load instead.)
//
// The format, version 3, little-endian as the host writes it:
//
//   distcomm-checkpoint 3\n
//   step <N>\n                                   steps completed when it was written
//   world_size <W>\n                             ranks of the run that wrote it
//   tensors <K>\n
//   header <crc32c>\n                            of the bytes of the four lines above
//   then K times:
//     <name> <dtype> <ndim> <d0> ... <d(ndim-1)> <nbytes> <crc32c>\n
//         e.g. "fc0.weight float32 2 128 16 8192 1f2e3d4c" (crc32c: of the raw bytes, 8 hex digits)
//     <nbytes raw bytes>\n
//   end\n
//
// Names hold no blank. read_checkpoint refuses, naming the file and the tensor where one
// is at fault: a file lacking its "end" line (a writer killed halfway, a full disk); a
// header or tensor bytes that do not match their checksum (a bit flipped on the disk or in
// a copy, a block overwritten, a header edited by hand); a step that is not the one in the
// file's name step_<N>.ckpt; numbers that are negative or larger than the file could hold
// (checked before anything is allocated); and anything that is not a regular file (a FIFO
// would block the reader forever, a directory is no file). The run must not resume from
// weights nobody wrote. Version 2 files (no world_size and no header line: their header is
// unchecked, but their step must still match the name and their tensors their checksums)
// and version 1 files (no checksums at all) are still read. The files are named
// step_<N, 10 digits>.ckpt, so that the newest is the one with the largest step.
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
  int64_t world_size = 0;  // of the run that wrote it; 0: unknown (versions 1 and 2)
  std::string path;        // the file it was read from; empty for one not read
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

// The tensors a run needs of a checkpoint, by name: each must be there with the same dtype
// and shape (the values are not looked at).
using TensorShapes = std::vector<std::pair<std::string, distcomm::Tensor>>;

// Throws std::runtime_error naming the checkpoint's file, the tensor and both shapes when
// one of `needed` is missing or of another dtype or shape (a checkpoint of another model).
void check_tensors(const Checkpoint& checkpoint, const TensorShapes& needed);

// The checkpoint with the largest step in dir that reads cleanly and passes
// check_tensors(needed), or nothing when dir holds none. Each one refused is skipped with
// one line on stderr naming the file and why, and the next older one is tried. Throws
// std::runtime_error, naming dir and the newest such file, when none is usable and at least
// one is another model's (a sound file that check_tensors refuses): that is a wrong folder,
// whose files a fresh start would overwrite and delete, not a run with nothing to resume.
std::optional<Checkpoint> newest_checkpoint(const std::string& dir, const TensorShapes& needed = {});

// Deletes what writers killed halfway left in dir. Only when no writer is running.
void remove_temporary_files(const std::string& dir);

// Deletes every checkpoint in dir but the `keep` of the largest steps (keep <= 0: none is
// deleted): a run that checkpoints every step would otherwise fill the disk. More than one
// is kept so that a damaged newest file still leaves one to resume from.
void remove_older_checkpoints(const std::string& dir, int keep);

}  // namespace examples
