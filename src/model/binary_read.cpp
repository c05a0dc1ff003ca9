#include "model/binary_read.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace plab {

FileBytes::FileBytes(const std::string& path, const std::string& expected) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    PLAB_CHECK(fd >= 0, "cannot open " << path << ": expected " << expected);
    struct stat st {};
    const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    if (!regular) ::close(fd);
    PLAB_CHECK(regular, path << " is not a regular file: expected " << expected);
    size_ = static_cast<std::size_t>(st.st_size);
    // mmap of 0 bytes is an error; an empty file is an empty span (the parser says why).
    void* p = size_ == 0 ? nullptr : ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);  // the mapping keeps the file open
    PLAB_CHECK(p != MAP_FAILED, "could not map " << path << " into memory (" << std::strerror(errno)
                                                 << "): expected " << expected);
    data_ = static_cast<const char*>(p);
}

FileBytes::~FileBytes() {
    if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
}

std::int32_t i32_at(std::span<const char> bytes, std::size_t off) {
    PLAB_ASSERT(off + 4 <= bytes.size());
    std::int32_t v;
    std::memcpy(&v, bytes.data() + off, 4);
    return v;
}

std::uint64_t LoadLimits::machine_memory_bytes() {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    // sysconf cannot fail for these on Linux; if it ever does, do not limit.
    if (pages <= 0 || page <= 0) return UINT64_MAX;
    return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
}

}  // namespace plab
