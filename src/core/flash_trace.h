// A tap on the `gpu` backend's flash attention kernel, emulated (`plab flash
// --model`, lesson 17): what one query head of one layer held after each key
// tile — the running max m, each lane's share of the denominator l, the first
// output component of the unnormalised acc — and each (query tile × key tile)'s
// verdict, as the kernel ran it, not as a model of it.
//
// What it teaches: a fast kernel's order is the whole story of its bits. Here
// it can be read: kernels/attention_flash_kernel.cuh folds a query tile's key tiles in
// two warp groups (tiles 0, 2, 4, ... and 1, 3, 5, ...), each row's denominator
// spread over 8 lanes (keys tx, tx+8, ...), merged at each 256-key segment's end.
// Only the emulated build (PLAB_SIMT_EMULATED) writes here: device code cannot
// call the host, and the native kernel must not pay for a branch it never takes.
// One tap at a time (a process-wide pointer, set around one prefill and cleared:
// FlashTap); records arrive from the emulator's fibers in any order, so each
// carries where it belongs.
#pragma once

#include <atomic>
#include <mutex>
#include <vector>

#include "core/mask.h"

namespace plab {

// One (query tile × key tile) the kernel looked at.
struct FlashTraceTile {
    int pos_lo = 0, pos_hi = 0;  // the query tile's positions
    int key_lo = 0, key_hi = 0;  // the key tile's
    int group = 0;               // the warp group that took it
    TileClass kind = TileClass::empty;
};

// One lane's share of one row after one key tile.
struct FlashTraceLane {
    int pos = 0, key_lo = 0, lane = 0;
    float m_old = 0;    // the group's running max for the row before the tile
    float m = 0;        // and after it
    float rescale = 0;  // exp(m_old - m) the tile applied
    float l_share = 0;  // this lane's share of l (keys lane, lane + 8, ... of the group's tiles)
};

// The first output component of a row's acc after one key tile (lane 0 owns it).
struct FlashTraceAcc {
    int pos = 0, key_lo = 0;
    float acc0 = 0;
};

struct FlashTrace {
    const float* k_pool = nullptr;  // which layer: its K pool, as the kernel receives it
    int head = -1;                  // which query head
    std::mutex mutex;
    std::vector<FlashTraceTile> tiles;
    std::vector<FlashTraceLane> lanes;
    std::vector<FlashTraceAcc> accs;

    bool wants(const float* pool, int h) const { return pool == k_pool && h == head; }
    void add(const FlashTraceTile& t) {
        std::lock_guard<std::mutex> lock(mutex);
        tiles.push_back(t);
    }
    void add(const FlashTraceLane& t) {
        std::lock_guard<std::mutex> lock(mutex);
        lanes.push_back(t);
    }
    void add(const FlashTraceAcc& t) {
        std::lock_guard<std::mutex> lock(mutex);
        accs.push_back(t);
    }
};

// The tap the emulated kernel writes to, or null (almost always).
inline std::atomic<FlashTrace*> g_flash_trace{nullptr};

// Sets the tap for its lifetime.
class FlashTap {
public:
    explicit FlashTap(FlashTrace& trace) { g_flash_trace.store(&trace); }
    ~FlashTap() { g_flash_trace.store(nullptr); }
    FlashTap(const FlashTap&) = delete;
    FlashTap& operator=(const FlashTap&) = delete;
};

}  // namespace plab
