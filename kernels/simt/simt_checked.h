// Shared memory that reports races by name (the emulated build; simt.h
// includes it). Natively the macros are plain __shared__ arrays.
//
// What it teaches: threads of a block see each other's shared-memory writes
// only after a barrier. Two threads touching one element between two
// __syncthreads, where at least one writes, is a data race: its result
// depends on an order nobody chose. The emulator's shuffled fiber order and
// NaN poison catch such a race when the wrong order happens to be run and the
// poisoned value happens to be read; a checked array catches every one, the
// first time it happens: each element remembers who last wrote it (the thread
// and the kernel's file:line, by std::source_location) in which barrier
// interval, so
//   - a read of an element another thread wrote in the same interval, and
//   - a write of an element another thread wrote in the same interval
// fail the launch with "race on shared tile `k_tile`[37]: threadIdx (5,0,0)
// reads it (flash.cu:61) after threadIdx (4,0,0) wrote it (flash.cu:52) with no
// __syncthreads between"; and an index outside the array fails with its
// name, the index and the line. A warp-level handoff (__syncwarp) does not
// end an interval here: use __syncthreads around checked tiles.
//
//   PLAB_CHECKED_SHARED(float, k_tile, 64 * 33);   // a static tile
//   PLAB_CHECKED_DYNAMIC_SHARED(float, tiles);     // the launch's dynamic bytes
//   auto v_tile = tiles + 16 * dh;                 // a checked pointer into it
//   k_tile[e] = ...; const float x = v_tile[j * dh + d];
#pragma once

#include <cstdint>
#include <source_location>
#include <string>
#include <vector>

namespace plab::simt {

// An index into a checked array, with the kernel line that wrote it (the
// default argument is evaluated where the index is converted: at `tile[i]`).
struct SharedIndex {
    long long i;
    std::source_location at;
    SharedIndex(long long index, std::source_location where = std::source_location::current())
        : i(index), at(where) {}
};

// Per element of one checked array: the last write, in which interval, by whom.
class RaceBook {
public:
    explicit RaceBook(const char* name) : name_(name) {}
    void cover(std::size_t n) {
        if (records_.size() < n) records_.resize(n);
    }
    void check_index(long long i, std::size_t size, const std::source_location& at) const;
    void on_read(std::size_t i, const std::source_location& at);
    void on_write(std::size_t i, const std::source_location& at);

private:
    struct Record {
        std::uint64_t interval = 0;
        int thread = -1;
        const char* file = nullptr;
        int line = 0;
    };
    std::string race(std::size_t i, const char* doing, const std::source_location& at,
                     const Record& r) const;
    const char* name_;
    std::vector<Record> records_;
};

// One element, checked when read (converted to T) or written (assigned).
template <typename T>
class SharedRef {
public:
    SharedRef(T* p, RaceBook* book, std::size_t i, std::source_location at)
        : p_(p), book_(book), i_(i), at_(at) {}
    operator T() const {
        book_->on_read(i_, at_);
        return *p_;
    }
    SharedRef& operator=(T v) {
        book_->on_write(i_, at_);
        *p_ = v;
        return *this;
    }
    SharedRef& operator=(const SharedRef& other) { return *this = static_cast<T>(other); }
    SharedRef& operator+=(T v) { return *this = static_cast<T>(*this) + v; }
    SharedRef& operator-=(T v) { return *this = static_cast<T>(*this) - v; }
    SharedRef& operator*=(T v) { return *this = static_cast<T>(*this) * v; }
    SharedRef& operator/=(T v) { return *this = static_cast<T>(*this) / v; }

private:
    T* p_;
    RaceBook* book_;
    std::size_t i_;
    std::source_location at_;
};

// A pointer into a checked array: indexing and offsets as a T* allows.
template <typename T>
class CheckedPtr {
public:
    CheckedPtr(T* base, RaceBook* book, std::size_t size, long long offset = 0)
        : base_(base), book_(book), size_(size), offset_(offset) {}
    SharedRef<T> operator[](SharedIndex i) const {
        const long long at = offset_ + i.i;
        book_->check_index(at, size_, i.at);
        return SharedRef<T>(base_ + at, book_, static_cast<std::size_t>(at), i.at);
    }
    CheckedPtr operator+(long long k) const { return {base_, book_, size_, offset_ + k}; }
    CheckedPtr operator-(long long k) const { return {base_, book_, size_, offset_ - k}; }

private:
    T* base_;
    RaceBook* book_;
    std::size_t size_;
    long long offset_;
};

// A static checked array of N elements.
template <typename T, std::size_t N>
class CheckedShared {
public:
    explicit CheckedShared(const char* name) : book_(name) { book_.cover(N); }
    SharedRef<T> operator[](SharedIndex i) { return CheckedPtr<T>(data, &book_, N)[i]; }
    CheckedPtr<T> operator+(long long k) { return CheckedPtr<T>(data, &book_, N, k); }
    operator CheckedPtr<T>() { return CheckedPtr<T>(data, &book_, N); }
    T data[N];

private:
    RaceBook book_;
};

// The launch's dynamic shared memory as checked T's.
template <typename T>
CheckedPtr<T> checked_dynamic_shared(RaceBook& book) {
    const std::size_t n = dynamic_shared_bytes() / sizeof(T);
    book.cover(n);
    return CheckedPtr<T>(static_cast<T*>(dynamic_shared()), &book, n);
}

}  // namespace plab::simt

#define PLAB_CHECKED_SHARED(type, name, n)                     \
    static ::plab::simt::CheckedShared<type, (n)> name(#name); \
    ::plab::simt::static_shared(name.data, sizeof(name.data))
#define PLAB_CHECKED_DYNAMIC_SHARED(type, name)            \
    static ::plab::simt::RaceBook name##_race_book(#name); \
    const ::plab::simt::CheckedPtr<type> name =            \
        ::plab::simt::checked_dynamic_shared<type>(name##_race_book)
