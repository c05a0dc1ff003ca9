// Paged KV cache assignment, C++ variant: fill in kv_cache_append and
// kv_cache_gather (lessons/assignments/kv_cache/README.md, "C++ variant").
//
// Grade with:  plab grade kv_cache starter.cpp
//
// plab compiles this file (c++ -O1 -shared -fPIC -std=c++17) and drives the
// cache as it drives the Python variant's class: kv_cache_new, then for each
// chunk kv_cache_append and a read of the block table, the pools and
// kv_cache_gather. Arrays are float32, row-major. The functions you write
// return 0 when done; their bodies below return -1: "not written yet".
// Everything else here is given: the struct, making and freeing it, and the
// functions the grader reads it with.
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
    return -1;  // not written yet
}

// Writes K and V of positions 0..length-1 in position order into k_out and
// v_out, (length, Hkv, Dh) each.
extern "C" int kv_cache_gather(const PagedKVCache* cache, float* k_out, float* v_out) {
    return -1;  // not written yet
}

// Given: making, freeing and reading the cache.
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
