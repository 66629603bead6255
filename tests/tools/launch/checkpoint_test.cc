// examples/checkpoint: the format round-trips, and a damaged or half-written file is never
// taken for a checkpoint.
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "examples/checkpoint.h"
#include "tests/testing/test_files.h"

namespace examples {
namespace {

using distcomm::Tensor;
using distcomm::testing::temp_path;

Checkpoint sample(int64_t step) {
  Checkpoint c;
  c.step = step;
  Tensor w = Tensor::empty({2, 3});
  for (int i = 0; i < 6; ++i) w.set_item(i, 0.5 * i - 1 + static_cast<double>(step));
  c.tensors.emplace_back("fc0.weight", w);
  c.tensors.emplace_back("momentum.fc0.weight", Tensor::of<double>({1e-300, -2.5}));
  c.tensors.emplace_back("counter", Tensor::of<int64_t>({int64_t{1} << 40}));
  return c;
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

TEST(Checkpoint, RoundTripsEveryTensorExactly) {
  // Folders that do not exist yet, two levels of them: created.
  const std::string dir = temp_path("roundtrip/nested");
  write_checkpoint(dir, sample(7));
  Checkpoint back = read_checkpoint(checkpoint_path(dir, 7));
  EXPECT_EQ(back.step, 7);
  const Checkpoint original = sample(7);
  ASSERT_EQ(back.tensors.size(), original.tensors.size());
  for (size_t i = 0; i < back.tensors.size(); ++i) {
    EXPECT_EQ(back.tensors[i].first, original.tensors[i].first);
    EXPECT_EQ(back.tensors[i].second.describe(), original.tensors[i].second.describe());
    EXPECT_EQ(back.tensors[i].second.to_doubles(), original.tensors[i].second.to_doubles());
  }
  EXPECT_THROW(back.at("no.such"), std::runtime_error);
}

TEST(Checkpoint, TheNewestCleanFileWinsAndADamagedOneIsSkipped) {
  const std::string dir = temp_path("newest");
  EXPECT_FALSE(newest_checkpoint(dir).has_value()) << "no folder: no checkpoint";
  write_checkpoint(dir, sample(20));
  write_checkpoint(dir, sample(40));
  write_checkpoint(dir, sample(60));
  // Step 60's file cut short, as a writer that did not rename atomically could leave it.
  const std::string path60 = checkpoint_path(dir, 60);
  struct stat st;
  ASSERT_EQ(::stat(path60.c_str(), &st), 0);
  ASSERT_EQ(::truncate(path60.c_str(), st.st_size - 10), 0);
  EXPECT_THROW(read_checkpoint(path60), std::runtime_error);
  std::optional<Checkpoint> newest = newest_checkpoint(dir);
  ASSERT_TRUE(newest.has_value());
  EXPECT_EQ(newest->step, 40);
}

TEST(Checkpoint, AWriteLeavesNoTemporaryFileAndLeftoversAreRemoved) {
  const std::string dir = temp_path("temps");
  write_checkpoint(dir, sample(1));
  const std::string leftover = checkpoint_path(dir, 2) + ".tmp.12345";
  std::ofstream(leftover) << "half a checkpoint";
  EXPECT_EQ(newest_checkpoint(dir)->step, 1) << "a temporary file is not a checkpoint";
  remove_temporary_files(dir);
  EXPECT_FALSE(exists(leftover));
  EXPECT_TRUE(exists(checkpoint_path(dir, 1)));
}

// A run that checkpoints every step keeps the newest few, not thousands of files.
TEST(Checkpoint, OlderCheckpointsAreRemovedButTheNewestKept) {
  const std::string dir = temp_path("pruned");
  for (int64_t step : {5, 10, 15, 20}) write_checkpoint(dir, sample(step));
  std::ofstream(dir + "/notes.txt") << "not a checkpoint: left alone";
  remove_older_checkpoints(dir, 0);
  EXPECT_TRUE(exists(checkpoint_path(dir, 5))) << "keep 0 keeps every one";
  remove_older_checkpoints(dir, 2);
  EXPECT_FALSE(exists(checkpoint_path(dir, 5)));
  EXPECT_FALSE(exists(checkpoint_path(dir, 10)));
  EXPECT_TRUE(exists(checkpoint_path(dir, 15)));
  EXPECT_TRUE(exists(checkpoint_path(dir, 20)));
  EXPECT_TRUE(exists(dir + "/notes.txt"));
  EXPECT_EQ(newest_checkpoint(dir)->step, 20);
  // A file of another name for a step (unpadded) is deleted by its name, and does not take
  // a newer one's place among the kept.
  std::ofstream(dir + "/step_3.ckpt") << "an old one, named another way";
  write_checkpoint(dir, sample(25));
  remove_older_checkpoints(dir, 2);
  EXPECT_FALSE(exists(dir + "/step_3.ckpt"));
  EXPECT_FALSE(exists(checkpoint_path(dir, 15)));
  EXPECT_TRUE(exists(checkpoint_path(dir, 20)));
  EXPECT_TRUE(exists(checkpoint_path(dir, 25)));
}

// 4 bytes inside a tensor's data overwritten, the file's length and end mark intact (an
// outside user's probe resumed from such a file and ended with another loss): refused by
// its checksum, and the next older checkpoint is the newest.
TEST(Checkpoint, DamageInsideATensorIsRefusedByItsChecksum) {
  const std::string dir = temp_path("damaged_bytes");
  write_checkpoint(dir, sample(30));
  write_checkpoint(dir, sample(50));
  const std::string path50 = checkpoint_path(dir, 50);
  std::string bytes;
  {
    std::ifstream in(path50, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const size_t data = bytes.find("\nfc0.weight ");
  ASSERT_NE(data, std::string::npos) << bytes;
  const size_t first_byte = bytes.find('\n', data + 1) + 1;  // after the tensor's line
  bytes[first_byte + 9] = static_cast<char>(bytes[first_byte + 9] ^ 0x01);  // one bit of one weight
  std::ofstream(path50, std::ios::binary | std::ios::trunc) << bytes;
  try {
    read_checkpoint(path50);
    FAIL() << "read a checkpoint whose bytes were changed after it was written";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'fc0.weight' does not match its checksum"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(newest_checkpoint(dir)->step, 30);
}

// The checksum is CRC-32C (Castagnoli) as everyone computes it: its check value, the CRC of
// the ASCII bytes "123456789", is e3069283.
TEST(Checkpoint, TheChecksumIsCrc32c) {
  const std::string dir = temp_path("check_value");
  Checkpoint c;
  c.step = 1;
  const std::string text = "123456789";
  c.tensors.emplace_back("ascii", Tensor::of<uint8_t>(std::vector<uint8_t>(text.begin(), text.end())));
  write_checkpoint(dir, c);
  std::ifstream in(checkpoint_path(dir, 1), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(bytes.find("\nascii uint8 1 9 9 e3069283\n"), std::string::npos) << bytes;
}

// A file of the first version (no checksums) still reads.
TEST(Checkpoint, AVersion1FileStillReads) {
  const std::string path = temp_path("version1.ckpt");
  const double values[2] = {1.5, -2.0};
  {
    std::ofstream out(path, std::ios::binary);
    out << "distcomm-checkpoint 1\nstep 9\ntensors 1\nw float64 1 2 16\n";
    out.write(reinterpret_cast<const char*>(values), sizeof(values));
    out << "\nend\n";
  }
  const Checkpoint back = read_checkpoint(path);
  EXPECT_EQ(back.step, 9);
  EXPECT_EQ(back.at("w").to_doubles(), (std::vector<double>{1.5, -2.0}));
}

TEST(Checkpoint, AFileOfAnotherKindIsRefusedByName) {
  const std::string path = temp_path("not_a_checkpoint.ckpt");
  std::ofstream(path) << "hello\n";
  try {
    read_checkpoint(path);
    FAIL() << "read a file that is no checkpoint";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": not a distcomm checkpoint"), std::string::npos) << e.what();
  }
}

// The file's bytes with `from` replaced by `to` once (as `sed -i` would edit it).
void edit(const std::string& path, const std::string& from, const std::string& to) {
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const size_t at = bytes.find(from);
  ASSERT_NE(at, std::string::npos) << from << " not in " << path;
  bytes.replace(at, from.size(), to);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// What newest_checkpoint says on stderr, and the step it chose (-1: none).
std::pair<int64_t, std::string> choose(const std::string& dir, const TensorShapes& needed = {}) {
  ::testing::internal::CaptureStderr();
  std::optional<Checkpoint> c = newest_checkpoint(dir, needed);
  return {c ? c->step : -1, ::testing::internal::GetCapturedStderr()};
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// An outside user's probe: step 40's header edited to another step resumed the run there
// with step 40's weights. Every edit is refused, naming the file, and step 20 is chosen.
TEST(CheckpointHeader, AnEditedStepIsRefusedAndTheNextOlderOneUsed) {
  for (const std::string step : {"70", "4000", "-5", "99999999999999999999", "40 "}) {
    const std::string dir = temp_path("edited_step_" + std::to_string(std::hash<std::string>()(step)));
    write_checkpoint(dir, sample(20));
    write_checkpoint(dir, sample(40));
    const std::string path40 = checkpoint_path(dir, 40);
    edit(path40, "\nstep 40\n", "\nstep " + step + "\n");
    EXPECT_THROW(read_checkpoint(path40), std::runtime_error) << step;
    const auto [chosen, said] = choose(dir);
    EXPECT_EQ(chosen, 20) << step << ": " << said;
    EXPECT_TRUE(has(said, "skipping checkpoint " + path40 + ": its header does not match its checksum")) << said;
  }
}

// A sound file under another step's name (copied, renamed): its step is not the name's.
TEST(CheckpointHeader, TheStepMustMatchTheFileName) {
  const std::string dir = temp_path("renamed");
  write_checkpoint(dir, sample(20));
  write_checkpoint(dir, sample(40));
  const std::string path70 = checkpoint_path(dir, 70);
  ASSERT_EQ(::rename(checkpoint_path(dir, 40).c_str(), path70.c_str()), 0);
  const auto [chosen, said] = choose(dir);
  EXPECT_EQ(chosen, 20) << said;
  EXPECT_TRUE(has(said, path70 + ": its header says step 40 but its name says step 70")) << said;
}

// Version 2 (no header checksum) still reads; its step is checked against the name and
// refused when negative, so an edit there is caught too, unless it names the file's step.
TEST(CheckpointHeader, AVersion2FileReadsAndItsStepIsChecked) {
  const std::string dir = temp_path("version2");
  write_checkpoint(dir, sample(10));
  auto write_v2 = [&](int64_t name_step, const std::string& step_text) {
    std::ofstream out(checkpoint_path(dir, name_step), std::ios::binary);
    out << "distcomm-checkpoint 2\nstep " << step_text << "\ntensors 1\nw uint8 1 3 3 " << "364b3fb7" << "\nabc\nend\n";
  };
  write_v2(30, "30");
  const Checkpoint v2 = read_checkpoint(checkpoint_path(dir, 30));
  EXPECT_EQ(v2.step, 30);
  EXPECT_EQ(v2.world_size, 0) << "unknown in version 2";
  write_v2(50, "70");
  write_v2(60, "-5");
  const auto [chosen, said] = choose(dir);
  EXPECT_EQ(chosen, 30) << said;
  EXPECT_TRUE(has(said, checkpoint_path(dir, 50) + ": its header says step 70 but its name says step 50")) << said;
  EXPECT_TRUE(has(said, checkpoint_path(dir, 60) + ": bad header line 'step -5'")) << said;
}

// A FIFO named like a checkpoint blocked rank 0 in open() for ever; a directory was "cut
// short". Both are refused before they are opened, by name.
TEST(CheckpointFile, AnythingButARegularFileIsRefusedWithoutBlocking) {
  const std::string dir = temp_path("not_files");
  write_checkpoint(dir, sample(20));
  const std::string fifo = checkpoint_path(dir, 40), folder = checkpoint_path(dir, 60);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  ASSERT_EQ(::mkdir(folder.c_str(), 0755), 0);
  ::alarm(30);  // a reader blocked in open() ends the test here rather than at bazel's timeout
  const auto [chosen, said] = choose(dir);
  ::alarm(0);
  EXPECT_EQ(chosen, 20) << said;
  EXPECT_TRUE(has(said, "checkpoint " + fifo + ": is not a regular file")) << said;
  EXPECT_TRUE(has(said, "checkpoint " + folder + ": is a directory")) << said;
}

// Damage in a tensor's description: each refusal names the file and the tensor, and no
// absurd size is allocated (std::bad_alloc, or the machine's memory, before).
TEST(CheckpointFile, ADamagedTensorDescriptionNamesTheFileAndTheTensor) {
  const std::vector<std::pair<std::string, std::string>> damages = {
      {"fc0.weight flxat32 2 2 3 24 ", "unknown dtype 'flxat32'"},
      {"fc0.weight float32 2 -2 -3 24 ", "dimension 0 is '-2', not a size"},
      {"fc0.weight float32 2 99999999 99999999 24 ", "24 bytes for float32[99999999, 99999999]"},
      {"fc0.weight float32 2 99999999 99999999 39999999200000004 ", "is cut short"},
      {"fc0.weight float32 99999999999 2 3 24 ", "bad number of dimensions '99999999999'"},
      {"fc0.weight float32 4000000000 2 3 24 ", "bad number of dimensions '4000000000'"},
  };
  for (const auto& [line, why] : damages) {
    const std::string dir = temp_path("description_" + std::to_string(std::hash<std::string>()(line)));
    write_checkpoint(dir, sample(20));
    write_checkpoint(dir, sample(40));
    const std::string path40 = checkpoint_path(dir, 40);
    edit(path40, "fc0.weight float32 2 2 3 24 ", line);
    const auto [chosen, said] = choose(dir);
    EXPECT_EQ(chosen, 20) << said;
    EXPECT_TRUE(has(said, "skipping checkpoint " + path40 + ": tensor 'fc0.weight'")) << said;
    EXPECT_TRUE(has(said, why)) << said;
  }
}

// A checkpoint of another model (another --hidden) was fatal in the copy, naming neither
// file nor tensor. It is skipped while choosing, naming the file, the tensor, both shapes.
TEST(CheckpointModel, ACheckpointOfAnotherModelIsSkippedForAnOlderOne) {
  const std::string dir = temp_path("other_model");
  write_checkpoint(dir, sample(20));
  Checkpoint other = sample(40);
  other.tensors[0].second = Tensor::empty({2, 5});
  write_checkpoint(dir, other);
  Checkpoint fewer = sample(60);
  fewer.tensors.pop_back();
  write_checkpoint(dir, fewer);
  const TensorShapes needed = sample(0).tensors;
  const auto [chosen, said] = choose(dir, needed);
  EXPECT_EQ(chosen, 20) << said;
  EXPECT_TRUE(has(said, checkpoint_path(dir, 40) + ": tensor 'fc0.weight' is float32[2, 5] in the file but "
                                                   "float32[2, 3] in the model")) << said;
  EXPECT_TRUE(has(said, checkpoint_path(dir, 60) + ": has no tensor 'counter'")) << said;
  EXPECT_EQ(choose(dir).first, 60) << "without a model to match, the newest sound file";
}

// A folder of another model's checkpoints only: a run started afresh there wrote its own
// files under the same step names and deleted the others as older (--keep_checkpoints).
// It is refused, naming the folder and the newest such file; damage alone still starts
// afresh.
TEST(CheckpointModel, AFolderOfOnlyAnotherModelsCheckpointsIsRefused) {
  const std::string dir = temp_path("only_other_model");
  Checkpoint other = sample(40);
  other.tensors[0].second = Tensor::empty({2, 5});
  write_checkpoint(dir, other);
  write_checkpoint(dir, sample(60));
  edit(checkpoint_path(dir, 60), "\nstep 60\n", "\nstep 61\n");  // damaged: its header checksum fails
  const TensorShapes needed = sample(0).tensors;
  ::testing::internal::CaptureStderr();
  try {
    newest_checkpoint(dir, needed);
    ::testing::internal::GetCapturedStderr();
    FAIL() << "a folder holding another model's checkpoint and a damaged one was taken for empty";
  } catch (const std::runtime_error& e) {
    ::testing::internal::GetCapturedStderr();
    const std::string what = e.what();
    EXPECT_TRUE(has(what, dir + " holds 2 checkpoint(s) and none is of this model")) << what;
    EXPECT_TRUE(has(what, checkpoint_path(dir, 40) + ": tensor 'fc0.weight' is float32[2, 5]")) << what;
    EXPECT_TRUE(has(what, "use another folder, or move them away")) << what;
  }
  EXPECT_EQ(choose(dir).first, 40) << "without a model to match, the newest sound file";

  const std::string damaged_only = temp_path("only_damaged");
  write_checkpoint(damaged_only, sample(60));
  edit(checkpoint_path(damaged_only, 60), "\nstep 60\n", "\nstep 61\n");
  EXPECT_EQ(choose(damaged_only, needed).first, -1) << "damage alone: nothing to resume, start afresh";
}

// The world size of the run that wrote it is kept: the resuming run says when it differs.
TEST(CheckpointHeader, TheWorldSizeRoundTrips) {
  const std::string dir = temp_path("world_size");
  Checkpoint c = sample(5);
  c.world_size = 4;
  write_checkpoint(dir, c);
  const Checkpoint back = read_checkpoint(checkpoint_path(dir, 5));
  EXPECT_EQ(back.world_size, 4);
  EXPECT_EQ(back.path, checkpoint_path(dir, 5));
}

}  // namespace
}  // namespace examples
