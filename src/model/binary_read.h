// Reading model files safely: the whole file as bytes (memory-mapped, so a
// 400 MB checkpoint is not read into a second buffer before it is parsed),
// fields at byte offsets, and the memory limit every loader checks a header's
// claims against *before* it allocates.
//
// What it teaches: a file found on the internet is untrusted input. Its header
// may claim any size; the loader compares every claim with the bytes that are
// really there and with the memory the machine has, and only then allocates.
// The parsers take bytes from memory (std::span), so the fuzzers in tests/fuzz
// call exactly the code that reads a file; the file readers are thin wrappers.
// Left out: Windows (mmap is POSIX), files that change while mapped.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace plab {

// A whole file, mapped read-only into memory for as long as this object lives.
class FileBytes {
public:
    // `expected` names what a readable file would be, for the error.
    FileBytes(const std::string& path, const std::string& expected);
    ~FileBytes();
    FileBytes(const FileBytes&) = delete;
    FileBytes& operator=(const FileBytes&) = delete;

    std::span<const char> bytes() const { return {data_, size_}; }

private:
    const char* data_ = nullptr;
    std::size_t size_ = 0;
};

// The int32 at byte `off` (host order: little-endian, as llama2.c writes it).
// The caller has checked off + 4 <= bytes.size().
std::int32_t i32_at(std::span<const char> bytes, std::size_t off);

// The most bytes one model (its weights as float32) may occupy once loaded.
// Default: the machine's physical memory (sysconf), so a header that asks for
// more is refused with one line instead of failing deep inside an allocation.
struct LoadLimits {
    std::uint64_t max_bytes = machine_memory_bytes();
    static std::uint64_t machine_memory_bytes();
};

}  // namespace plab
