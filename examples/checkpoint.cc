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
namespace {

constexpr char kMagic[] = "distcomm-checkpoint 2";
constexpr char kMagicVersion1[] = "distcomm-checkpoint 1";  // read, without checksums
constexpr char kSuffix[] = ".ckpt";
constexpr char kTempMarker[] = ".tmp";

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error("checkpoint " + path + ": " + what);
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
uint32_t crc32c(const void* data, size_t n) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xFFu] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

std::string hex8(uint32_t v) {
  char text[9];
  std::snprintf(text, sizeof(text), "%08x", v);
  return text;
}

// The step of a file named step_<N>.ckpt, or -1.
int64_t step_of(const std::string& name) {
  const std::string prefix = "step_";
  const std::string suffix = kSuffix;
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return -1;
  }
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(digits);
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
  throw std::runtime_error("checkpoint of step " + std::to_string(step) + " has no tensor '" + name + "' (it has " +
                           names + ")");
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
  make_folders(dir);
  const std::string path = checkpoint_path(dir, checkpoint.step);
  // In the same folder: rename() is atomic only within one file system.
  const std::string temp = path + kTempMarker + "." + std::to_string(::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail_errno(temp, "cannot create");
  try {
    std::ostringstream header;
    header << kMagic << "\nstep " << checkpoint.step << "\ntensors " << checkpoint.tensors.size() << "\n";
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

Checkpoint read_checkpoint(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) fail_errno(path, "cannot open");
  struct Closer {
    FILE* f;
    ~Closer() { std::fclose(f); }
  } closer{f};
  auto line = [&](const char* what) {
    std::string s;
    int c;
    while ((c = std::fgetc(f)) != EOF && c != '\n') s.push_back(static_cast<char>(c));
    if (c == EOF) fail(path, std::string("ends before ") + what + " (a writer stopped halfway?)");
    return s;
  };
  const std::string magic = line("its header");
  const bool checksums = magic == kMagic;
  if (!checksums && magic != kMagicVersion1) fail(path, "not a distcomm checkpoint of version 1 or 2");
  Checkpoint ckpt;
  size_t count = 0;
  if (std::sscanf(line("the step").c_str(), "step %lld", reinterpret_cast<long long*>(&ckpt.step)) != 1 ||
      std::sscanf(line("the tensor count").c_str(), "tensors %zu", &count) != 1) {
    fail(path, "bad header");
  }
  for (size_t i = 0; i < count; ++i) {
    std::istringstream in(line("a tensor"));
    std::string name, dtype;
    int64_t ndim = -1;
    in >> name >> dtype >> ndim;
    std::vector<int64_t> shape(static_cast<size_t>(std::max<int64_t>(ndim, 0)));
    for (int64_t& d : shape) in >> d;
    size_t nbytes = 0;
    in >> nbytes;
    std::string checksum;
    if (checksums) in >> checksum;
    if (!in || ndim < 0 || (checksums && checksum.size() != 8)) {
      fail(path, "bad description of tensor " + std::to_string(i));
    }
    distcomm::Tensor t = distcomm::Tensor::empty(shape, distcomm::parse_dtype(dtype));
    if (t.nbytes() != nbytes) fail(path, "tensor '" + name + "': " + std::to_string(nbytes) + " bytes for " + t.describe());
    if (std::fread(t.data(), 1, nbytes, f) != nbytes || std::fgetc(f) != '\n') {
      fail(path, "tensor '" + name + "' is cut short (a writer stopped halfway?)");
    }
    if (checksums && hex8(crc32c(t.data(), nbytes)) != checksum) {
      fail(path, "tensor '" + name + "' does not match its checksum (crc32c " + hex8(crc32c(t.data(), nbytes)) +
                     ", written " + checksum + "): the file was damaged after it was written");
    }
    ckpt.tensors.emplace_back(name, t);
  }
  if (line("its end mark") != "end") fail(path, "no end mark after the last tensor");
  return ckpt;
}

std::optional<Checkpoint> newest_checkpoint(const std::string& dir) {
  std::vector<int64_t> steps;
  for (const std::string& name : names_in(dir)) {
    const int64_t step = step_of(name);
    if (step >= 0) steps.push_back(step);
  }
  std::sort(steps.rbegin(), steps.rend());
  for (int64_t step : steps) {
    try {
      return read_checkpoint(checkpoint_path(dir, step));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "skipping a damaged checkpoint: %s\n", e.what());
    }
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
