// Launch recording: the piece of simt.h that CUDA graphs build on (issue 47).
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

    bool same_launch(const LaunchRecord& o) const {
        return kernel == o.kernel && shared_bytes == o.shared_bytes &&
               std::equal(grid, grid + 3, o.grid) && std::equal(block, block + 3, o.block) &&
               args == o.args;
    }
};

// The launches recorded since begin, in launch order. flush() is for host
// code that must see their results now (a copy back, a buffer about to be
// rewritten): it launches what is pending, in order, and keeps recording.
class LaunchRecorder {
public:
    std::vector<LaunchRecord> records;
    int flushes = 0;  // times flush() launched pending records: a step that did is not replayable
    std::uint64_t epoch = 0;  // which recording this is (ResidentArray asks, gpu_host_state.h)

    void flush() {
        if (records.empty()) return;
        std::vector<LaunchRecord> pending = std::move(records);
        records.clear();
        for (LaunchRecord& r : pending) r.launch(nullptr);
        ++flushes;
    }
};

// The recorder of this thread, or null: launches run at once (the default).
inline thread_local LaunchRecorder* active_recorder = nullptr;

// The arguments' bytes, one parameter after the other. A parameter that is a
// struct (AttentionShape) brings its padding too; the callers build such
// structs from value-initialised ones, so equal fields give equal bytes, and
// a difference only costs a replay (never wrong bits).
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

// Appends one launch to `recorder`: what identifies it (the kernel, grid,
// block, shared bytes and the arguments' bytes) and `launch`, which runs it
// on a given stream. Both builds' launch() call it.
template <typename Dim, typename... T>
void record_launch(LaunchRecorder& recorder, const char* name, std::uintptr_t kernel,
                   const Dim& grid, const Dim& block, std::size_t shared_bytes,
                   const std::tuple<T...>& params, std::function<void(void*)> launch) {
    LaunchRecord r;
    r.name = name;
    r.kernel = kernel;
    const unsigned g[3] = {grid.x, grid.y, grid.z}, b[3] = {block.x, block.y, block.z};
    std::copy(g, g + 3, r.grid);
    std::copy(b, b + 3, r.block);
    r.shared_bytes = shared_bytes;
    r.args = argument_bytes(params);
    r.launch = std::move(launch);
    recorder.records.push_back(std::move(r));
}

}  // namespace PLAB_SIMT_NS
}  // namespace plab::simt
