#include "api/plugin/elf_extent.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace distcomm {
namespace internal {
namespace {

bool read_at(int fd, void* out, size_t size, uint64_t offset) {
  const ssize_t n = ::pread(fd, out, size, static_cast<off_t>(offset));
  return n == static_cast<ssize_t>(size);
}

// What the file's program headers need of it: the end of its last loadable segment's bytes
// in the file, and of the headers themselves; 0 when the file is not a 64-bit ELF file.
uint64_t bytes_needed(int fd, uint64_t file_size) {
  Elf64_Ehdr header;
  if (!read_at(fd, &header, sizeof(header), 0)) return 0;
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64) return 0;
  if (header.e_phentsize != sizeof(Elf64_Phdr)) return 0;
  const uint64_t headers_end = header.e_phoff + uint64_t{header.e_phnum} * sizeof(Elf64_Phdr);
  if (headers_end > file_size) return headers_end;
  std::vector<Elf64_Phdr> segments(header.e_phnum);
  if (!segments.empty() && !read_at(fd, segments.data(), segments.size() * sizeof(Elf64_Phdr), header.e_phoff)) {
    return headers_end;
  }
  uint64_t needed = headers_end;
  for (const Elf64_Phdr& s : segments) {
    if (s.p_type == PT_LOAD && s.p_offset + s.p_filesz > needed) needed = s.p_offset + s.p_filesz;
  }
  return needed;
}

}  // namespace

std::string elf_cut_short(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";  // dlopen says why
  struct stat st;
  uint64_t needed = 0;
  uint64_t size = 0;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    size = static_cast<uint64_t>(st.st_size);
    needed = bytes_needed(fd, size);
  }
  ::close(fd);
  if (needed <= size) return "";
  return "the file is cut short: " + std::to_string(size) + " bytes, but its segments need " + std::to_string(needed) +
         " (a copy or an install that did not finish? copy or install it again)";
}

}  // namespace internal
}  // namespace distcomm
