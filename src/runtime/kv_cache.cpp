#include "runtime/kv_cache.h"

namespace plab {

KvCache::KvCache(Backend& backend, const ModelConfig& config, int block_size, int num_blocks)
    : blocks_(block_size, num_blocks),  // checks the sizes before any memory is taken
      prefix_(blocks_),
      storage_(backend, config, block_size, num_blocks) {}

}  // namespace plab
