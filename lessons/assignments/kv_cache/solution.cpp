// Reference solution of the kv_cache assignment, C++ variant (instructors only:
// remove before handing out). Grade with:  plab grade kv_cache solution.cpp
//
// PagedAttention's layout (Kwon et al. 2023), as the engine's (src/core/kv_layout.h):
// position p lives in block block_table[p / B] at offset p % B.
#include <algorithm>
#include <cstddef>
#include <vector>

// One sequence's paged KV cache, for one layer.
struct PagedKVCache {
    int num_blocks, block_size, n_kv_heads, head_dim;  // block_size: B
    std::vector<float> k_pool, v_pool;                 // (num_blocks, B, Hkv, Dh) each, row-major
    std::vector<int> free_blocks;  // the pool's free list: take blocks from its front
    std::vector<int> block_table;  // entry i: the physical block of positions i*B .. i*B+B-1
    int length = 0;                // positions cached
};

// Stores one chunk's K and V, each (C, Hkv, Dh), at positions length .. length+C-1:
// position p lives in block block_table[p / B] at offset p % B; a block is taken
// from the front of free_blocks each time a position needs a new one.
extern "C" int kv_cache_append(PagedKVCache* cache, const float* k, const float* v, int C) {
    const int b = cache->block_size;
    const std::size_t row = std::size_t(cache->n_kv_heads) * cache->head_dim;  // Hkv * Dh
    for (int i = 0; i < C; ++i) {
        const int p = cache->length + i;
        if (p / b == static_cast<int>(cache->block_table.size())) {  // the last block is full
            if (cache->free_blocks.empty()) return 2;                // the pool is full
            cache->block_table.push_back(cache->free_blocks.front());
            cache->free_blocks.erase(cache->free_blocks.begin());
        }
        const int block = cache->block_table[p / b];
        const std::size_t at = (std::size_t(block) * b + p % b) * row;
        std::copy(k + i * row, k + (i + 1) * row, cache->k_pool.begin() + at);
        std::copy(v + i * row, v + (i + 1) * row, cache->v_pool.begin() + at);
    }
    cache->length += C;
    return 0;
}

// Writes K and V of positions 0..length-1 in position order into k_out and
// v_out, (length, Hkv, Dh) each.
extern "C" int kv_cache_gather(const PagedKVCache* cache, float* k_out, float* v_out) {
    const int b = cache->block_size;
    const std::size_t row = std::size_t(cache->n_kv_heads) * cache->head_dim;
    for (int p = 0; p < cache->length; ++p) {
        const int block = cache->block_table[p / b];
        const std::size_t at = (std::size_t(block) * b + p % b) * row;
        std::copy(cache->k_pool.begin() + at, cache->k_pool.begin() + at + row, k_out + p * row);
        std::copy(cache->v_pool.begin() + at, cache->v_pool.begin() + at + row, v_out + p * row);
    }
    return 0;
}

// Given in the starter: making, freeing and reading the cache.
extern "C" PagedKVCache* kv_cache_new(int num_blocks, int block_size, int n_kv_heads, int head_dim,
                                      const int* free_blocks, int n_free) {
    const std::size_t pool = std::size_t(num_blocks) * block_size * n_kv_heads * head_dim;
    return new PagedKVCache{num_blocks,
                            block_size,
                            n_kv_heads,
                            head_dim,
                            std::vector<float>(pool, 0.0f),
                            std::vector<float>(pool, 0.0f),
                            std::vector<int>(free_blocks, free_blocks + n_free),
                            {},
                            0};
}
extern "C" void kv_cache_delete(PagedKVCache* cache) {
    delete cache;
}
extern "C" int kv_cache_length(const PagedKVCache* cache) {
    return cache->length;
}
extern "C" int kv_cache_table_size(const PagedKVCache* cache) {
    return static_cast<int>(cache->block_table.size());
}
extern "C" const int* kv_cache_block_table(const PagedKVCache* cache) {
    return cache->block_table.data();
}
extern "C" const float* kv_cache_k_pool(const PagedKVCache* cache) {
    return cache->k_pool.data();
}
extern "C" const float* kv_cache_v_pool(const PagedKVCache* cache) {
    return cache->v_pool.data();
}
