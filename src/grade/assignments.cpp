// The table of assignments `plab grade` knows, in teaching order: one row each
// (name, what it asks for, the function that makes its checks). Adding an
// assignment adds its row here, its grade/NAME.cpp and its folder under
// lessons/assignments/ (tests/assignments checks that the table and the folders agree).
#include "grade/grade.h"

namespace plab::grade {

const std::vector<Assignment>& assignments() {
    static const std::vector<Assignment> all = {
        {"attention", "one head's causal attention, then any mask as a 0/1 matrix",
         attention_checks},
        {"rope", "RoPE at absolute positions, chunk by chunk", rope_checks},
        {"kv_cache", "a paged KV cache: block table, append, gather", kv_cache_checks},
        {"sampler", "temperature, top-k, top-p, and draws", sampler_checks},
        {"chunked_prefill", "the whole model's prefill from the weights, chunk by chunk",
         chunked_prefill_checks},
        {"online_softmax", "attention over key tiles with a running max and denominator",
         online_softmax_checks},
        {"flash_kernel", "the tile loop of a flash attention CUDA kernel, run on the SIMT emulator",
         flash_kernel_checks},
    };
    return all;
}

}  // namespace plab::grade
