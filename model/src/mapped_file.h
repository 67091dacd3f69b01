#pragma once
// RAII read-only mmap of a whole file, shared by the safetensors and GGUF
// readers: tensor views hold a shared_ptr to it, so the mapping lives as long
// as any weight viewing it. Internal to model/.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>

#include "tessera/core/error.h"

namespace tessera::model {

// The registry release_mapped_pages consults (mapped_pages.cpp): only bytes
// of a live file mapping may be given back.
void register_mapping(const std::byte* data, size_t size);
void unregister_mapping(const std::byte* data);

// Read-only private mapping of a whole file; unmapped when the last tensor
// view referring to it goes away.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      throw_error<FileError>("{}: cannot open: {}", path.string(), std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw_error<FileError>("{}: not a regular file", path.string());
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        int err = errno;
        ::close(fd);
        throw_error<FileError>("{}: cannot map {} bytes: {}", path.string(), size_,
                               std::strerror(err));
      }
      data_ = static_cast<const std::byte*>(p);
      register_mapping(data_, size_);
    }
    ::close(fd);  // the mapping stays valid without the descriptor
  }
  ~MappedFile() {
    if (data_) {
      unregister_mapping(data_);
      ::munmap(const_cast<std::byte*>(data_), size_);
    }
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tessera::model
