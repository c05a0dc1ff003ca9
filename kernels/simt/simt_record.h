// Launch recording: the piece of simt.h that CUDA graphs build on.
//
// What it teaches: a decode step launches the same ~50 kernels, with the same
// arguments, every step; only values in device memory (the token, the
// positions, the KV slots, the block table) change. Launching them one by one
// costs a few microseconds of CPU and driver time each, which at batch 1 is
// most of the step. A CUDA graph is the list of launches, handed to the driver
// once and then replayed with one call. To build that list, simt::launch can
// *record* instead of launching: while a LaunchRecorder is active on this
// thread, every PLAB_LAUNCH appends a LaunchRecord (the kernel, its grid,
// block and shared bytes, its converted arguments, and a closure that
// launches exactly that on a given stream) and returns. Two records are the
// same launch when all of those are equal byte for byte: then replaying the
// old one is the same as launching the new one (kernels/step_graph.h).
//
// Both builds compile this text (inline namespace PLAB_SIMT_NS, as simt.h):
// the native closure launches with <<<grid, block, shared, stream>>>, the
// emulated one runs the grid in the emulator.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace plab::simt {
inline namespace PLAB_SIMT_NS {

struct LaunchRecord {
    const char* name = "";
    std::uintptr_t kernel = 0;
    unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
    std::size_t shared_bytes = 0;
    std::vector<unsigned char> args;    // every converted argument's bytes, end to end
    std::function<void(void*)> launch;  // launches this on the stream given (cudaStream_t)
};

// The launches recorded since begin, in launch order. flush() is for host
// code that must see their results now (a copy back, a buffer about to be
// rewritten): it launches what is pending, in order, and keeps recording.
//
// Compared as they come: with `expected` set (the last step's launches), a
// launch equal to the next expected one is only counted (`matched`), so a
// step that repeats the last builds no record at all: no closure and no
// argument bytes allocated, ~50 of each a decode step. The first launch that
// differs builds the records before it as copies of the expected ones (the
// same launches) and records from then on, as without `expected`.
class LaunchRecorder {
public:
    std::vector<LaunchRecord> records;  // built: all launches, or none while `matching()`
    int flushes = 0;  // times flush() launched pending records: a step that did is not replayable
    std::uint64_t epoch = 0;  // which recording this is (ResidentArray asks, gpu_host_state.h)
    const std::vector<LaunchRecord>* expected = nullptr;  // the last step's, or null
    std::size_t matched = 0;  // while matching(): this step's launches so far, expected's first
    std::size_t built = 0;    // records built this step (a step that repeats the last: 0)

    bool matching() const { return expected != nullptr && !diverged_; }

    void reset(const std::vector<LaunchRecord>* expect) {
        records.clear();
        flushes = 0;
        expected = expect != nullptr && !expect->empty() ? expect : nullptr;
        matched = 0;
        built = 0;
        diverged_ = false;
    }

    // The launches so far stop matching: build their records.
    void diverge() {
        if (!matching()) return;
        records.assign(expected->begin(), expected->begin() + static_cast<std::ptrdiff_t>(matched));
        built += matched;
        diverged_ = true;
    }

    void flush() {
        diverge();  // a flushed step is not replayed: no need to match further
        if (records.empty()) return;
        std::vector<LaunchRecord> pending = std::move(records);
        records.clear();
        for (LaunchRecord& r : pending) r.launch(nullptr);
        ++flushes;
    }

private:
    bool diverged_ = false;
};

// The recorder of this thread, or null: launches run at once (the default).
inline thread_local LaunchRecorder* active_recorder = nullptr;

// The arguments' bytes, one parameter after the other. A parameter that is a
// struct (AttentionShape, RopeKvAppendArgs) has no padding: every gap is a
// named field (static_asserts beside each), since padding holds whatever the
// stack held, which follows the compiler's code for this CPU, and a launch
// whose bytes differ is not replayed (never wrong bits, but the step runs
// launch by launch, and tests count replays).
template <typename... T>
std::vector<unsigned char> argument_bytes(const std::tuple<T...>& t) {
    static_assert((std::is_trivially_copyable_v<T> && ...),
                  "kernel arguments are copied byte for byte");
    std::vector<unsigned char> out((sizeof(T) + ... + 0));
    std::size_t at = 0;
    std::apply(
        [&](const auto&... a) {
            ((std::memcpy(out.data() + at, &a, sizeof a), at += sizeof a), ...);
        },
        t);
    return out;
}

// Whether the arguments' bytes are `bytes` (argument_bytes without building them).
template <typename... T>
bool same_argument_bytes(const std::tuple<T...>& t, const std::vector<unsigned char>& bytes) {
    if (bytes.size() != (sizeof(T) + ... + 0)) return false;
    std::size_t at = 0;
    return std::apply(
        [&](const auto&... a) {
            return ((std::memcmp(bytes.data() + at, &a, sizeof a) == 0 && (at += sizeof a, true)) &&
                    ...);
        },
        t);
}

// Appends one launch to `recorder`: what identifies it (the kernel, grid,
// block, shared bytes and the arguments' bytes) and `launch`, a callable that
// runs it on a given stream. Both builds' launch() call it. While the
// recorder is matching, a launch equal to the next expected one is only counted.
template <typename Dim, typename F, typename... T>
void record_launch(LaunchRecorder& recorder, const char* name, std::uintptr_t kernel,
                   const Dim& grid, const Dim& block, std::size_t shared_bytes,
                   const std::tuple<T...>& params, F&& launch) {
    const unsigned g[3] = {grid.x, grid.y, grid.z}, b[3] = {block.x, block.y, block.z};
    if (recorder.matching()) {
        const std::vector<LaunchRecord>& expected = *recorder.expected;
        if (recorder.matched < expected.size()) {
            const LaunchRecord& e = expected[recorder.matched];
            if (e.kernel == kernel && e.shared_bytes == shared_bytes &&
                std::equal(g, g + 3, e.grid) && std::equal(b, b + 3, e.block) &&
                same_argument_bytes(params, e.args)) {
                ++recorder.matched;
                return;
            }
        }
        recorder.diverge();
    }
    LaunchRecord r;
    r.name = name;
    r.kernel = kernel;
    std::copy(g, g + 3, r.grid);
    std::copy(b, b + 3, r.block);
    r.shared_bytes = shared_bytes;
    r.args = argument_bytes(params);
    r.launch = std::function<void(void*)>(std::forward<F>(launch));
    recorder.records.push_back(std::move(r));
    ++recorder.built;
}

}  // namespace PLAB_SIMT_NS
}  // namespace plab::simt
