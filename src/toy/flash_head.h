// FlashAttention by hand on a model head (`plab flash --model M --layer L
// --head H`, lesson 17): one head of one layer of a real prefill, walked in the
// `gpu` backend's order — read from the emulated kernel itself where the walk
// uses the kernel's own key tile, and from a CPU port of its order
// (toy/flash_order.h) at any tile — and compared with cpu-ref's whole softmax
// on the very same Q, K and V, and with the `gpu` backend's output.
//
// What it teaches: the order is the bits. At the kernel's own tile the port's
// every running max, denominator and output equals the emulated kernel's, bit
// for bit, and so does the gpu backend's output; another tile is another
// order: the same answer within a few ulps, not the same bits. Against cpu-ref
// (one max, one sum in key order, one division per row) the difference is a
// few ulps too, which is why `gpu` promises a tolerance and `cpu-ref` bits.
// Natively (a CUDA device) the backend's expf is not this libm's: no tap, the
// states come from the port, and the gpu output is within the tolerance.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/weights.h"
#include "runtime/chunk_plan.h"
#include "runtime/mask_grammar.h"
#include "toy/flash_order.h"

namespace plab {

struct FlashHeadOptions {
    int layer = 0, head = 0;
    int tile = 0;         // the walk's key tile; 0: the gpu kernel's own
    int query_tile = 64;  // the kernel's block of queries (16 in chunks of <= 16 queries)
    int block_size = 16;  // KV block size of the session
    // The backend whose prefill gives the head's q, k, v and output: "gpu" (its
    // kernel's order is the walk's); another (the web page has no gpu) gives the
    // inputs, the walk is the port alone, and its output is compared with that
    // backend's instead.
    std::string backend = "gpu";
    std::string mask_spec = "causal";
};

// The tolerance a walk in another order is held to, per output value:
// |got - want| <= atol + rtol·max_j |v_j| over the keys its row may see. The
// gpu backend's attention tolerance (tests/engine/backend_op_rows.cpp,
// kAttentionGpu: tiles rescale partial sums, and the library expf) in the
// units that fit a real head: an output is a weighted mean of value rows, so
// its rounding error scales with the values averaged, not with the mean, which
// may cancel to nearly 0 (then relative to |want| nothing would pass).
inline constexpr double kFlashAtol = 1e-6, kFlashRtol = 1e-5;

// How far two arrays of outputs are apart.
struct FlashHeadDiff {
    float max_abs = 0;
    long long max_ulps = 0;   // 0: the same bits everywhere
    long long differing = 0;  // values whose bits differ
    double worst = 0;         // the largest |diff| / (atol + rtol·max|v|): <= 1 is within
    bool within() const { return worst <= 1.0; }
};

struct FlashHeadRun {
    int layer = 0, head = 0, kv_head = 0, head_dim = 0, n_tokens = 0;
    std::string backend;  // "gpu (emulated)" or "gpu (native)"
    std::string mask;
    ChunkPlan plan;
    int kernel_key_tile = 0;  // the gpu kernel's own key tile on this device
    int key_tile = 0;         // the walk's
    int query_tile = 0;
    // The states below were read from the emulated kernel (the walk is at its
    // own tile and the kernel ran emulated); otherwise they are the port's.
    bool recorded = false;
    long long kernel_states = 0;  // row-tile states the kernel recorded
    // Recorded: the port's tiles and states equal the kernel's, bit for bit.
    bool port_matches_kernel = false;
    FlashOrderResult walk;           // tiles and states in the kernel's order; out unused
    std::vector<float> scores;       // (T, T): q·k/sqrt(Dh) after modifiers, -inf masked
    std::vector<float> output;       // (T, Dh): the walk's result
    std::vector<float> reference;    // (T, Dh): cpu-ref's attention on the same q, k, v
    std::vector<float> value_scale;  // (T, Dh): max |v_j| over the keys row i may see
    std::vector<float> gpu;          // (T, Dh): the gpu backend's output of the head
    FlashHeadDiff vs_reference, vs_gpu, gpu_vs_reference;
    long long skipped = 0, unreached = 0, partial = 0, full = 0;  // tiles, every chunk
};

// Prefills `tokens` on the gpu backend in `plan`'s chunks under `mask`, reads
// layer o.layer's head o.head (its Q, K, V and output, and the emulated
// kernel's state through core/flash_trace.h), and walks it. Throws
// plab::Error (one line) for a layer, head or tile out of range.
FlashHeadRun run_flash_head(const Weights& weights, std::span<const int32_t> tokens,
                            const ChunkPlan& plan, const BoundMask& mask,
                            const FlashHeadOptions& o);

}  // namespace plab
