// examples/checkpoint: the format round-trips, and a damaged or half-written file is never
// taken for a checkpoint.
#include <sys/stat.h>
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

}  // namespace
}  // namespace examples
