// Shared memory that reports races by name (the emulated build; simt.h
// includes it): every PLAB_SHARED and PLAB_DYNAMIC_SHARED array of every
// kernel is checked. Natively the macros are plain __shared__ arrays.
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
// name, the index and the line. A __syncwarp ends the interval for the
// lanes of its warp only: after it they may read each other's writes, while
// the other warps still wait for a __syncthreads. (A shuffle is not a memory
// fence: it ends nothing.)
//
//   PLAB_SHARED(float, xs, [16][17]);      // a static tile, each index checked
//   PLAB_DYNAMIC_SHARED(float, tiles);     // the launch's dynamic bytes
//   auto v_tile = tiles + 16 * dh;         // a checked pointer into it (auto, not float*)
//   xs[ty][tx] = ...; const float x = v_tile[j * dh + d];
//   load_float4(reg, &xs[t][4 * tx]);      // four checked reads, alignment checked
// (PLAB_CHECKED_SHARED(type, name, n) and PLAB_CHECKED_DYNAMIC_SHARED, the
// names the flash_kernel assignment's starter uses, are the same arrays.)
//
// The cost: every shared access of an emulated kernel is a few compares more
// (the fast path below is inline); the emulator runs a block's threads one
// after another anyway, so it measures nothing a GPU would do.
#pragma once

#include <cstdint>
#include <source_location>
#include <string>
#include <type_traits>
#include <vector>

namespace plab::simt {

// Which barrier interval the running thread is in, and which thread it is
// (the emulator keeps both current): what every checked access compares.
struct RaceClock {
    std::uint64_t interval = 1;  // a new one at every block barrier and block start
    int thread = -1;             // the running fiber, -1 outside a kernel
    // Per warp of the block (1024 threads at most): how many __syncwarp it has
    // completed. Lanes of one warp may read each other's writes after one.
    std::uint32_t warp_epoch[32] = {};
};
inline RaceClock g_race_clock;

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
    void check_index(long long i, std::size_t size, const std::source_location& at) const {
        if (i < 0 || static_cast<std::size_t>(i) >= size) [[unlikely]]
            fail_index(i, size, at);
    }
    void on_read(std::size_t i, const std::source_location& at) {
        const Record& r = records_[i];
        if (r.interval == g_race_clock.interval && r.thread != g_race_clock.thread) [[unlikely]]
            if (!warp_synced(r)) fail_race(i, "reads", at, "");
    }
    void on_write(std::size_t i, const std::source_location& at) {
        Record& r = records_[i];
        if (r.interval == g_race_clock.interval && r.thread != g_race_clock.thread) [[unlikely]]
            if (!warp_synced(r)) fail_race(i, "writes", at, " (two writes)");
        const int warp = g_race_clock.thread / 32;
        r = {g_race_clock.interval, g_race_clock.thread, g_race_clock.warp_epoch[warp],
             at.file_name(), static_cast<int>(at.line())};
    }

private:
    struct Record {
        std::uint64_t interval = 0;
        int thread = -1;
        std::uint32_t warp_epoch = 0;  // the writer's warp's __syncwarp count at the write
        const char* file = nullptr;
        int line = 0;
    };
    // The writer is a lane of the running thread's warp and the warp has met
    // at a __syncwarp since the write: the write is visible (CUDA's rule).
    static bool warp_synced(const Record& r) {
        const int warp = g_race_clock.thread / 32;
        return r.thread / 32 == warp && g_race_clock.warp_epoch[warp] != r.warp_epoch;
    }
    [[noreturn]] void fail_index(long long i, std::size_t size,
                                 const std::source_location& at) const;
    [[noreturn]] void fail_race(std::size_t i, const char* doing, const std::source_location& at,
                                const char* tail) const;
    const char* name_;
    std::vector<Record> records_;
};

template <typename T>
class CheckedPtr;

// One element, checked when read (converted to T) or written (assigned).
template <typename T>
class SharedRef {
public:
    SharedRef(T* p, RaceBook* book, std::size_t i, std::size_t size, std::source_location at)
        : p_(p), book_(book), i_(i), size_(size), at_(at) {}
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
    // &tile[i]: a checked pointer to the element, as &a[i] is a T*.
    CheckedPtr<T> operator&() const;

private:
    T* p_;
    RaceBook* book_;
    std::size_t i_, size_;
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
        return SharedRef<T>(base_ + at, book_, static_cast<std::size_t>(at), size_, i.at);
    }
    SharedRef<T> operator*() const { return (*this)[SharedIndex(0)]; }
    CheckedPtr operator+(long long k) const { return {base_, book_, size_, offset_ + k}; }
    CheckedPtr operator-(long long k) const { return {base_, book_, size_, offset_ - k}; }
    // The address it points at (load_float4's alignment check; nothing else
    // may use it: accesses through it would not be checked).
    T* raw() const { return base_ + offset_; }

private:
    T* base_;
    RaceBook* book_;
    std::size_t size_;
    long long offset_;
};

template <typename T>
CheckedPtr<T> SharedRef<T>::operator&() const {
    return CheckedPtr<T>(p_ - i_, book_, size_, static_cast<long long>(i_));
}

// A checked array of shape A (T[N] or T[N][M]...), or one of its rows: each
// index is checked against its own extent, then the element is recorded at
// its flat index.
template <typename A>
class CheckedRows {
    static_assert(std::rank_v<A> >= 1, "PLAB_SHARED declares an array: [1] for one value");
    using Row = std::remove_extent_t<A>;
    using Scalar = std::remove_all_extents_t<A>;
    static constexpr std::size_t kExtent = std::extent_v<A>;
    static constexpr std::size_t kRowScalars = sizeof(Row) / sizeof(Scalar);

public:
    CheckedRows(Scalar* base, RaceBook* book, std::size_t size, long long offset)
        : base_(base), book_(book), size_(size), offset_(offset) {}
    auto operator[](SharedIndex i) const {
        book_->check_index(i.i, kExtent, i.at);
        const long long at = offset_ + i.i * static_cast<long long>(kRowScalars);
        if constexpr (std::rank_v<Row> == 0) {
            return SharedRef<Scalar>(base_ + at, book_, static_cast<std::size_t>(at), size_, i.at);
        } else {
            return CheckedRows<Row>(base_, book_, size_, at);
        }
    }
    // A one-dimensional row decays to a pointer, as an array does.
    operator CheckedPtr<Scalar>() const requires(std::rank_v<A> == 1) {
        return CheckedPtr<Scalar>(base_, book_, size_, offset_);
    }
    CheckedPtr<Scalar> operator+(long long k) const requires(std::rank_v<A> == 1) {
        return CheckedPtr<Scalar>(base_, book_, size_, offset_ + k);
    }

private:
    Scalar* base_;
    RaceBook* book_;
    std::size_t size_;
    long long offset_;
};

// A static checked array (PLAB_SHARED): its storage, 16-byte aligned as the
// native declaration is, and its book.
template <typename A>
class CheckedShared {
    using Scalar = std::remove_all_extents_t<A>;
    static constexpr std::size_t kScalars = sizeof(A) / sizeof(Scalar);

public:
    explicit CheckedShared(const char* name) : book_(name) { book_.cover(kScalars); }
    auto operator[](SharedIndex i) { return rows()[i]; }
    operator CheckedPtr<Scalar>() requires(std::rank_v<A> == 1) { return rows(); }
    CheckedPtr<Scalar> operator+(long long k) requires(std::rank_v<A> == 1) { return rows() + k; }
    alignas(16) A data;

private:
    CheckedRows<A> rows() {
        return CheckedRows<A>(reinterpret_cast<Scalar*>(&data), &book_, kScalars, 0);
    }
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

// A pointer into shared memory as device helpers take it (natively T*).
template <typename T>
using SharedPtr = ::plab::simt::CheckedPtr<T>;

// 16-byte loads to and from checked shared memory: four checked accesses at
// the caller's line, then simt.h's load_float4 (its alignment check).
inline void load_float4(float* dst, ::plab::simt::CheckedPtr<float> src,
                        std::source_location at = std::source_location::current()) {
    for (int e = 0; e < 4; ++e)
        static_cast<void>(static_cast<float>(src[::plab::simt::SharedIndex(e, at)]));
    ::load_float4(dst, static_cast<const float*>(src.raw()));
}
inline void load_float4(::plab::simt::CheckedPtr<float> dst, const float* src,
                        std::source_location at = std::source_location::current()) {
    float v[4];
    ::load_float4(v, src);
    for (int e = 0; e < 4; ++e) dst[::plab::simt::SharedIndex(e, at)] = v[e];
}

#define PLAB_SHARED(type, name, extents)                          \
    static ::plab::simt::CheckedShared<type extents> name(#name); \
    ::plab::simt::static_shared(&name.data, sizeof(name.data))
#define PLAB_DYNAMIC_SHARED(type, name)                    \
    static ::plab::simt::RaceBook name##_race_book(#name); \
    const ::plab::simt::CheckedPtr<type> name =            \
        ::plab::simt::checked_dynamic_shared<type>(name##_race_book)
#define PLAB_CHECKED_SHARED(type, name, n) PLAB_SHARED(type, name, [n])
#define PLAB_CHECKED_DYNAMIC_SHARED(type, name) PLAB_DYNAMIC_SHARED(type, name)
