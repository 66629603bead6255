// EXAMPLE CODE: see checkpoint.h for the format.
#include "examples/checkpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include <distcomm/api/dtype.h>

namespace examples {

// What read_checkpoint throws: its text names the file already. Anything else that escapes
// the reading (a library's exception) is given the file's name on the way out.
// Outside the anonymous namespace, so that a message naming its type reads plainly.
struct CheckpointError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What check_tensors throws: a sound file of another model. newest_checkpoint tells it apart
// from damage, since a folder holding only other models' checkpoints is a user's slip.
struct OtherModelsCheckpoint : CheckpointError {
  using CheckpointError::CheckpointError;
};

namespace {

constexpr char kMagic[] = "distcomm-checkpoint 3";
constexpr char kMagicVersion2[] = "distcomm-checkpoint 2";  // read: tensor checksums, no header checksum
constexpr char kMagicVersion1[] = "distcomm-checkpoint 1";  // read, without checksums
// No run takes this many steps; a larger number in a header or a name is damage.
constexpr int64_t kMaxStep = 999999999999999999;  // 18 digits: fits int64_t with room
constexpr char kSuffix[] = ".ckpt";
constexpr char kTempMarker[] = ".tmp";

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw CheckpointError("checkpoint " + path + ": " + what);
}

[[noreturn]] void refuse_other_model(const std::string& path, const std::string& what) {
  throw OtherModelsCheckpoint("checkpoint " + path + ": " + what);
}

[[noreturn]] void fail_errno(const std::string& path, const std::string& what) {
  fail(path, what + ": " + std::strerror(errno));
}

void write_all(int fd, const std::string& path, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail_errno(path, "write");
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), bytewise from a table: a
// checkpoint is written and read once per many steps, so speed here is not the point.
// crc32c_update(crc32c(a), b) is crc32c(a followed by b); the header's is built that way.
uint32_t crc32c_update(uint32_t crc_so_far, const void* data, size_t n) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = crc_so_far ^ 0xFFFFFFFFu;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xFFu] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

uint32_t crc32c(const void* data, size_t n) { return crc32c_update(0, data, n); }

// A count written as decimal digits only (no sign, no blank), at most `max`; -1 otherwise.
int64_t parse_count(const std::string& text, int64_t max) {
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos) return -1;
  const int64_t v = std::stoll(text);
  return v <= max ? v : -1;
}

// "float32[16, 64]", as the messages show a tensor.
std::string shape_text(distcomm::DType dtype, const std::vector<int64_t>& shape) {
  std::string s = std::string(distcomm::dtype_name(dtype)) + "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string hex8(uint32_t v) {
  char text[9];
  std::snprintf(text, sizeof(text), "%08x", v);
  return text;
}

// The step of a file named step_<N>.ckpt, or -1 (also for more digits than a step has).
int64_t step_of(const std::string& name) {
  const std::string prefix = "step_";
  const std::string suffix = kSuffix;
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return -1;
  }
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  // A name of 19 or more digits would overflow std::stoll, which throws.
  const std::string significant = digits.substr(std::min(digits.find_first_not_of('0'), digits.size() - 1));
  return parse_count(significant, kMaxStep);
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
    ::closedir(d);
  }
  return names;
}

}  // namespace

const distcomm::Tensor& Checkpoint::at(const std::string& name) const {
  std::string names;
  for (const auto& [n, t] : tensors) {
    if (n == name) return t;
    names += (names.empty() ? "" : ", ") + n;
  }
  throw std::runtime_error("checkpoint " + (path.empty() ? "of step " + std::to_string(step) : path) +
                           " has no tensor '" + name + "' (it has " + names + ")");
}

std::string checkpoint_path(const std::string& dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step_%010lld", static_cast<long long>(step));
  return dir + "/" + name + kSuffix;
}

// mkdir -p: the folders of dir from the top down.
void make_folders(const std::string& dir) {
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    const std::string folder = dir.substr(0, slash);
    if (!folder.empty() && ::mkdir(folder.c_str(), 0755) != 0 && errno != EEXIST) {
      fail_errno(folder, "cannot create the folder");
    }
    if (slash == std::string::npos) return;
  }
}

void write_checkpoint(const std::string& dir, const Checkpoint& checkpoint) {
  const std::string path = checkpoint_path(dir, checkpoint.step);
  // Nothing a reader would refuse: it takes a negative or absurd step for damage.
  if (checkpoint.step < 0 || checkpoint.step > kMaxStep) fail(path, "bad step " + std::to_string(checkpoint.step));
  if (checkpoint.world_size < 0) fail(path, "bad world size " + std::to_string(checkpoint.world_size));
  make_folders(dir);
  // In the same folder: rename() is atomic only within one file system.
  const std::string temp = path + kTempMarker + "." + std::to_string(::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail_errno(temp, "cannot create");
  try {
    std::ostringstream header;
    header << kMagic << "\nstep " << checkpoint.step << "\nworld_size " << checkpoint.world_size << "\ntensors "
           << checkpoint.tensors.size() << "\n";
    // The header has a checksum of its own: an edited step would otherwise resume a run at
    // a step its weights never reached.
    const std::string covered = header.str();
    header << "header " << hex8(crc32c(covered.data(), covered.size())) << "\n";
    write_all(fd, temp, header.str().data(), header.str().size());
    for (const auto& [name, t] : checkpoint.tensors) {
      if (name.empty() || name.find_first_of(" \n") != std::string::npos) fail(path, "bad tensor name '" + name + "'");
      std::ostringstream line;
      line << name << " " << distcomm::dtype_name(t.dtype()) << " " << t.dim();
      for (int64_t d : t.shape()) line << " " << d;
      line << " " << t.nbytes() << " " << hex8(crc32c(t.data(), t.nbytes())) << "\n";
      write_all(fd, temp, line.str().data(), line.str().size());
      write_all(fd, temp, t.data(), t.nbytes());
      write_all(fd, temp, "\n", 1);
    }
    write_all(fd, temp, "end\n", 4);
    // The data must be on disk before the name points at it, or a crash right after the
    // rename could leave a complete name over incomplete contents.
    if (::fsync(fd) != 0) fail_errno(temp, "fsync");
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  if (::close(fd) != 0) fail_errno(temp, "close");
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    errno = err;
    fail_errno(path, "rename");
  }
  // And the rename itself must reach the disk: sync the folder's entry.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

namespace {

// At most 60 characters of a line from the file, for a message: a damaged line may be long.
std::string quoted(const std::string& text) {
  return "'" + (text.size() > 60 ? text.substr(0, 60) + "..." : text) + "'";
}

// Refuses what is not a regular file before opening it, and opens without blocking: open()
// of a FIFO named like a checkpoint would wait for a writer that never comes, and the whole
// job with it. Returns the file and its size.
FILE* open_regular_file(const std::string& path, int64_t* size) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) fail_errno(path, "cannot open");
  if (S_ISDIR(st.st_mode)) fail(path, "is a directory, not a checkpoint file");
  if (!S_ISREG(st.st_mode)) fail(path, "is not a regular file (a FIFO, a socket or a device): not read");
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) fail_errno(path, "cannot open");
  // The name may have been replaced between stat() and open(): look at what was opened.
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "is not a regular file: not read");
  }
  FILE* f = ::fdopen(fd, "rb");
  if (f == nullptr) {
    const int err = errno;
    ::close(fd);
    errno = err;
    fail_errno(path, "cannot open");
  }
  *size = static_cast<int64_t>(st.st_size);
  return f;
}

Checkpoint read_file(const std::string& path) {
  int64_t size = 0;
  FILE* f = open_regular_file(path, &size);
  struct Closer {
    FILE* f;
    ~Closer() { std::fclose(f); }
  } closer{f};
  // The bytes of the file not read yet: no count in it may ask for more.
  auto left = [&] {
    const long at = std::ftell(f);
    return at < 0 ? int64_t{0} : size - static_cast<int64_t>(at);
  };
  auto line = [&](const char* what) {
    std::string s;
    int c;
    while ((c = std::fgetc(f)) != EOF && c != '\n') s.push_back(static_cast<char>(c));
    if (c == EOF) fail(path, std::string("ends before ") + what + " (a writer stopped halfway?)");
    return s;
  };
  std::string header;  // the lines that the header's checksum covers, as read
  auto header_line = [&](const char* what) {
    std::string s = line(what);
    header += s + "\n";
    return s;
  };
  const std::string magic = header_line("its header");
  const int version = magic == kMagic ? 3 : magic == kMagicVersion2 ? 2 : magic == kMagicVersion1 ? 1 : 0;
  if (version == 0) fail(path, "not a distcomm checkpoint of version 1, 2 or 3");
  const std::string step_line = header_line("the step");
  const std::string world_line = version >= 3 ? header_line("the world size") : "world_size 0";
  const std::string count_line = header_line("the tensor count");
  if (version >= 3) {
    const std::string written = line("the header's checksum");
    const std::string computed = hex8(crc32c(header.data(), header.size()));
    if (written != "header " + computed) {
      fail(path, "its header does not match its checksum (crc32c " + computed + ", line " + quoted(written) +
                     "): the file was damaged or edited after it was written");
    }
  }
  auto field = [&](const std::string& text, const std::string& key, int64_t max) {
    const int64_t v = text.compare(0, key.size() + 1, key + " ") == 0 ? parse_count(text.substr(key.size() + 1), max) : -1;
    if (v < 0) fail(path, "bad header line " + quoted(text) + " (expected '" + key + " <0 to " + std::to_string(max) + ">')");
    return v;
  };
  Checkpoint ckpt;
  ckpt.path = path;
  ckpt.step = field(step_line, "step", kMaxStep);
  ckpt.world_size = field(world_line, "world_size", int64_t{1} << 30);
  const int64_t count = field(count_line, "tensors", left());  // each takes more than a byte
  // A file whose header was edited, or that was copied to another step's name, would resume
  // the run at a step its weights never reached.
  const size_t slash = path.rfind('/');
  const int64_t named = step_of(path.substr(slash == std::string::npos ? 0 : slash + 1));
  if (named >= 0 && named != ckpt.step) {
    fail(path, "its header says step " + std::to_string(ckpt.step) + " but its name says step " +
                   std::to_string(named) + " (renamed, or edited?)");
  }
  for (int64_t i = 0; i < count; ++i) {
    const std::string description = line("a tensor");
    std::istringstream in(description);
    std::string name, dtype_text, ndim_text, nbytes_text, checksum, rest;
    in >> name >> dtype_text >> ndim_text;
    const std::string which = name.empty() ? "tensor " + std::to_string(i) : "tensor '" + name + "'";
    distcomm::DType dtype;
    try {
      dtype = distcomm::parse_dtype(dtype_text);
    } catch (const std::exception&) {
      fail(path, which + ": unknown dtype " + quoted(dtype_text));
    }
    // Every dimension takes two characters of the line at least: a larger count is damage,
    // refused before a vector of that size is allocated.
    const int64_t ndim = parse_count(ndim_text, static_cast<int64_t>(description.size() / 2));
    if (ndim < 0) fail(path, which + ": bad number of dimensions " + quoted(ndim_text));
    const int64_t room = left();
    std::vector<int64_t> shape;
    int64_t needed = static_cast<int64_t>(distcomm::element_size(dtype));  // bytes, saturated past room
    for (int64_t d = 0; d < ndim; ++d) {
      std::string dim_text;
      in >> dim_text;
      const int64_t dim = parse_count(dim_text, kMaxStep);
      if (dim < 0) fail(path, which + ": dimension " + std::to_string(d) + " is " + quoted(dim_text) + ", not a size");
      shape.push_back(dim);
      needed = (dim != 0 && needed > (room + 1) / dim) ? room + 1 : needed * dim;
    }
    in >> nbytes_text;
    if (version >= 2) in >> checksum;
    const int64_t nbytes = parse_count(nbytes_text, kMaxStep);
    if (nbytes < 0 || (version >= 2 && checksum.size() != 8) || (in >> rest)) {
      fail(path, which + ": bad description " + quoted(description));
    }
    if (nbytes >= room) fail(path, which + " is cut short (a writer stopped halfway?)");
    if (needed != nbytes) {
      fail(path, which + ": " + std::to_string(nbytes) + " bytes for " + shape_text(dtype, shape) + " (damaged?)");
    }
    // Only now, with its size known to fit in the file, is the tensor allocated.
    distcomm::Tensor t = distcomm::Tensor::empty(shape, dtype);
    if (std::fread(t.data(), 1, t.nbytes(), f) != t.nbytes() || std::fgetc(f) != '\n') {
      fail(path, which + " is cut short (a writer stopped halfway?)");
    }
    const std::string computed = hex8(crc32c(t.data(), t.nbytes()));
    if (version >= 2 && computed != checksum) {
      fail(path, which + " does not match its checksum (crc32c " + computed + ", written " + checksum +
                     "): the file was damaged after it was written");
    }
    ckpt.tensors.emplace_back(name, t);
  }
  if (line("its end mark") != "end") fail(path, "no end mark after the last tensor");
  return ckpt;
}

}  // namespace

Checkpoint read_checkpoint(const std::string& path) {
  try {
    return read_file(path);
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& e) {
    fail(path, e.what());  // a library's message, given the file's name
  }
}

void check_tensors(const Checkpoint& checkpoint, const TensorShapes& needed) {
  const std::string path = checkpoint.path.empty() ? "of step " + std::to_string(checkpoint.step) : checkpoint.path;
  for (const auto& [name, want] : needed) {
    const distcomm::Tensor* have = nullptr;
    std::string names;
    for (const auto& [n, t] : checkpoint.tensors) {
      if (n == name) have = &t;
      names += (names.empty() ? "" : ", ") + n;
    }
    if (have == nullptr) refuse_other_model(path, "has no tensor '" + name + "', which the model needs (it has " + names + ")");
    if (have->dtype() != want.dtype() || have->shape() != want.shape()) {
      refuse_other_model(path, "tensor '" + name + "' is " + shape_text(have->dtype(), have->shape()) + " in the file but " +
             shape_text(want.dtype(), want.shape()) + " in the model (a checkpoint of another model?)");
    }
  }
}

std::optional<Checkpoint> newest_checkpoint(const std::string& dir, const TensorShapes& needed) {
  // By the names found: a name that is not checkpoint_path()'s for its step is read as it
  // is, and its step still checked against it.
  std::vector<std::pair<int64_t, std::string>> found;
  for (const std::string& name : names_in(dir)) {
    const int64_t step = step_of(name);
    if (step >= 0) found.emplace_back(step, name);
  }
  std::sort(found.rbegin(), found.rend());
  std::string other_model;  // the newest refusal as another model's, if any
  for (const auto& [step, name] : found) {
    try {
      Checkpoint ckpt = read_checkpoint(dir + "/" + name);
      check_tensors(ckpt, needed);
      return ckpt;
    } catch (const OtherModelsCheckpoint& e) {
      if (other_model.empty()) other_model = e.what();
      std::fprintf(stderr, "skipping %s; trying the next older one\n", e.what());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "skipping %s; trying the next older one\n", e.what());
    }
  }
  // Only damage: a fresh start is all that is left. But a folder of another model's
  // checkpoints is most likely the wrong folder: a run starting afresh there would write
  // its own under the same step names and delete the others as older (an outside user's
  // probe lost another run's checkpoints this way).
  if (!other_model.empty()) {
    throw std::runtime_error(dir + " holds " + std::to_string(found.size()) +
                             " checkpoint(s) and none is of this model (the newest of another model: " +
                             other_model + "); a fresh start there would write over them and delete them: use "
                             "another folder, or move them away");
  }
  return std::nullopt;
}

void remove_temporary_files(const std::string& dir) {
  for (const std::string& name : names_in(dir)) {
    if (name.find(std::string(kSuffix) + kTempMarker) != std::string::npos) ::unlink((dir + "/" + name).c_str());
  }
}

void remove_older_checkpoints(const std::string& dir, int keep) {
  if (keep <= 0) return;
  // By the names found, not checkpoint_path(): a file named another way for its step
  // ("step_20.ckpt", which step_of reads too) would not be deleted, and would count among
  // the kept in place of a newer one.
  std::vector<std::pair<int64_t, std::string>> found;
  for (const std::string& name : names_in(dir)) {
    const int64_t step = step_of(name);
    if (step >= 0) found.emplace_back(step, name);
  }
  std::sort(found.rbegin(), found.rend());
  std::vector<int64_t> kept;
  for (const auto& [step, name] : found) {
    if (std::find(kept.begin(), kept.end(), step) == kept.end() && static_cast<int>(kept.size()) < keep) {
      kept.push_back(step);  // the first name of a step in order is kept; another of that step goes
      continue;
    }
    ::unlink((dir + "/" + name).c_str());
  }
}

}  // namespace examples
