// Launching flash attention: which instantiation of attention_flash_kernel
// (attention_flash_kernel.cuh) a call runs — the head_dim bucket, the tiles the
// device's shared memory allows, prefill or decode, one launch or a split over
// key segments plus the merge (attention_flash_merge.cu) — and its grid.
#include "attention_flash_kernel.cuh"

namespace plab::PLAB_SIMT_NS {

__global__ void attention_merge_kernel(float* out, const float* partials, int n_queries,
                                       int n_heads, int dh, int segments);

namespace {

// The launch of one instantiation: a block per (query tile, head), 8 warps;
// split, a block per (query tile, head) and key segment, then the merge.
template <int kDh, int kQueries, int kKeys, bool kDecode>
void launch_flash(float* out, const float* q, const float* k_pool, const float* v_pool,
                  const int32_t* block_table, const AttentionShape& s,
                  unsigned long long* tile_counts, const int32_t* pos0_at, FlashSplit split,
                  float* totals) {
    static const std::string name = "attention_flash_kernel<" + std::to_string(kDh) + ", " +
                                    std::to_string(kQueries) + ", " + std::to_string(kKeys) +
                                    (kDecode ? ", decode>" : ">");
    constexpr std::size_t dynamic_bytes = FlashLayout<kDh, kQueries, kKeys>::kBytes;
    // The tiles against the device's limit; opts in past 48 KiB. Once per
    // instantiation (a function-local static; retried if it threw), not on
    // every launch: the attribute stays set for the process. (An earlier
    // once-guarded opt-in "did not reach" the kernel on the H200 because the
    // linker had merged the native and emulated copies of the helper; the
    // per-build namespace of simt.h has kept them apart since.)
    static const bool opted_in = [] {
        simt::reserve_shared_memory(
            name.c_str(), attention_flash_kernel<kDh, kQueries, kKeys, kDecode>, dynamic_bytes);
        return true;
    }();
    (void)opted_in;
    const long long blocks = static_cast<long long>(blocks_for(s.n_queries, kQueries)) * s.n_heads;
    PLAB_CHECK(blocks <= 0x7fffffffLL, "attention_flash: " << blocks
                                                           << " blocks (query tiles x heads) "
                                                              "exceed the grid's 2^31 - 1");
    const unsigned segments = split.partials != nullptr ? static_cast<unsigned>(split.segments) : 1;
    simt::launch(name.c_str(), attention_flash_kernel<kDh, kQueries, kKeys, kDecode>,
                 dim3(static_cast<unsigned>(blocks), segments), dim3(kFlashThreads), dynamic_bytes,
                 out, q, k_pool, v_pool, block_table, s, tile_counts, pos0_at, split.partials,
                 totals);
    if (split.partials == nullptr) return;
    const long long outputs = static_cast<long long>(s.n_queries) * s.n_heads * s.head_dim;
    PLAB_LAUNCH(attention_merge_kernel, blocks_for(outputs, kMergeThreads), kMergeThreads, 0, out,
                split.partials, s.n_queries, s.n_heads, s.head_dim, split.segments);
}

// The device's per-block shared-memory limit (with opt-in), asked once, and
// the largest of kFlashSharedLimits at or under it: the tiles compiled for it.
long long flash_shared_limit() {
    static const long long limit = [] {
        int device = 0, optin = 0;
        PLAB_CUDA_CHECK(cudaGetDevice(&device));
        PLAB_CUDA_CHECK(
            cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
        long long best = 0;
        for (long long l : kFlashSharedLimits)
            if (l <= optin && l > best) best = l;
        PLAB_CHECK(best > 0,
                   "the gpu backend's flash attention needs 64 KiB of shared memory a "
                   "block (sm_75 and later); this device gives "
                       << optin << " B: use gpu-ref");
        return best;
    }();
    return limit;
}

// Calls f(std::integral_constant<int, I>) for the index I of kFlashHeadDims x
// kFlashSharedLimits (bucket-major) equal to (bucket, limit): one
// instantiation per bucket and limit, the same tiles compiled once.
constexpr std::size_t kLimits = std::size(kFlashSharedLimits);
// The index runs over both tilings: I < kPrefillTilings a prefill tiling,
// I >= kPrefillTilings the decode tiling (16 queries, the same keys) of I -
// kPrefillTilings.
constexpr std::size_t kPrefillTilings = std::size(kFlashHeadDims) * kLimits;
template <std::size_t I>
constexpr FlashTiles tiles_of() {
    constexpr std::size_t J = I % kPrefillTilings;
    constexpr FlashTiles prefill =
        flash_tiles_for(kFlashHeadDims[J / kLimits], kFlashSharedLimits[J % kLimits]);
    if constexpr (I >= kPrefillTilings) {
        return flash_decode_tiles(prefill);
    } else {
        return prefill;
    }
}
template <typename F, std::size_t... I>
bool dispatch_tiles(int bucket, long long limit, bool decode, F&& f, std::index_sequence<I...>) {
    return ((bucket == kFlashHeadDims[I % kPrefillTilings / kLimits] &&
                     limit == kFlashSharedLimits[I % kLimits] && decode == (I >= kPrefillTilings)
                 ? (f(std::integral_constant<std::size_t, I>{}), true)
                 : false) ||
            ...);
}

}  // namespace

FlashTiles flash_tiles(int head_dim) {
    PLAB_CHECK(head_dim >= 1 && head_dim <= kFlashMaxHeadDim,
               "the gpu backend's flash attention takes head_dim 1 to "
                   << kFlashMaxHeadDim << "; this model has head_dim " << head_dim
                   << ": use gpu-ref");
    const FlashTiles t = flash_tiles_for(flash_bucket(head_dim), flash_shared_limit());
    PLAB_ASSERT(t.queries > 0);
    return t;
}

FlashTiles flash_tiles(int head_dim, int n_queries) {
    const FlashTiles prefill = flash_tiles(head_dim);
    return n_queries <= kFlashDecodeQueries ? flash_decode_tiles(prefill) : prefill;
}

long long flash_total_floats(int head_dim, int n_queries, int n_heads) {
    const FlashTiles t = flash_tiles(head_dim, n_queries);
    const long long blocks = static_cast<long long>(blocks_for(n_queries, t.queries)) * n_heads;
    return blocks * kGroupThreads * (t.queries / kRowGroups) * 2;  // (m, l) a row of a thread
}

FlashTiles launch_attention_flash(float* out, const float* q, const float* k_pool,
                                  const float* v_pool, const int32_t* block_table,
                                  const AttentionShape& s, unsigned long long* tile_counts,
                                  const int32_t* pos0_at, FlashSplit split, float* totals) {
    const FlashTiles tiles = flash_tiles(s.head_dim, s.n_queries);
    PLAB_ASSERT(split.partials == nullptr ||
                (s.n_queries <= kFlashDecodeQueries && split.segments >= 1));
    // A decode call's kernel folds one segment a block: past 256 keys it must
    // be split (a step graph's call, pos0 0 here, was split by its capacity).
    PLAB_ASSERT(s.n_queries > kFlashDecodeQueries || split.partials != nullptr ||
                flash_segments(s.n_keys()) <= 1);
    // A prefill call past 256 keys keeps its rows' running totals in `totals`.
    PLAB_ASSERT(s.n_queries <= kFlashDecodeQueries || totals != nullptr ||
                flash_segments(s.n_keys()) <= 1);
    // A long row's total waits in out while the next segment may load the
    // queries again (FlashLayout::kHandoffOverQ): the two must not overlap.
    const long long size = static_cast<long long>(s.n_queries) * s.n_heads * s.head_dim;
    PLAB_ASSERT(out + size <= q || q + size <= out);
    const bool launched = dispatch_tiles(
        tiles.head_dim, flash_shared_limit(), s.n_queries <= kFlashDecodeQueries,
        [&](auto index) {
            constexpr FlashTiles t = tiles_of<decltype(index)::value>();
            static_assert(t.queries > 0, "every bucket has tiles under every limit");
            constexpr bool decode = decltype(index)::value >= kPrefillTilings;
            launch_flash<t.head_dim, t.queries, t.keys, decode>(
                out, q, k_pool, v_pool, block_table, s, tile_counts, pos0_at, split, totals);
        },
        std::make_index_sequence<2 * kPrefillTilings>{});
    PLAB_ASSERT(launched);
    return tiles;
}

}  // namespace plab::PLAB_SIMT_NS
