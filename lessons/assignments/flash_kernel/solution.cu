// Reference solution of the flash_kernel assignment (instructors only: remove
// before handing out). Grade with:  plab grade flash_kernel solution.cu
//
// One block per 32 queries, one thread per query. The block walks the keys in
// tiles of `tile`: its threads load the tile's K and V rows into shared memory
// together, wait, and each updates its own row's running max m, denominator l
// and unnormalised output acc with the tile's visible keys; wait; next tile.
// The output is acc / l. It runs on the SIMT emulator (no GPU needed): the
// grader passes host arrays, which the emulator's threads read directly (on a
// GPU the wrapper would copy them to device memory first).
#include <cmath>
#include <exception>
#include <string>

#include "simt/simt.h"

constexpr int kRows = 32;     // queries a block: one thread each
constexpr int kMaxTile = 32;  // keys a tile, at most
constexpr int kMaxDh = 64;    // components a row, at most

__global__ void flash_kernel(const float* q, const float* k, const float* v, const int* mask, int T,
                             int Dh, int tile, float* out, float* m_out, float* l_out) {
    PLAB_CHECKED_SHARED(float, k_tile, kMaxTile* kMaxDh);
    PLAB_CHECKED_SHARED(float, v_tile, kMaxTile* kMaxDh);
    const int row = blockIdx.x * kRows + threadIdx.x;  // this thread's query
    const bool mine = row < T;
    const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
    float m = -INFINITY, l = 0.0f, acc[kMaxDh] = {};
    for (int k0 = 0; k0 < T; k0 += tile) {
        const int n = min(tile, T - k0);  // keys in this tile
        // 1. Load: the block's threads copy the tile's K and V rows together.
        for (int e = threadIdx.x; e < n * Dh; e += blockDim.x) {
            k_tile[e] = k[k0 * Dh + e];
            v_tile[e] = v[k0 * Dh + e];
        }
        __syncthreads();  // the tile is complete before anyone reads it
        // 2. This row's scores in the tile, and the tile's max of the visible ones.
        if (mine) {
            float s[kMaxTile];
            float m_new = m;
            for (int j = 0; j < n; ++j) {
                if (mask[row * T + k0 + j] == 0) continue;
                float dot = 0.0f;
                for (int d = 0; d < Dh; ++d) dot += q[row * Dh + d] * k_tile[j * Dh + d];
                s[j] = dot * scale;
                m_new = fmaxf(m_new, s[j]);
            }
            // 3. Rescale what was summed against the old max, then add the tile.
            if (m_new > -INFINITY) {
                const float r = expf(m - m_new);
                l *= r;
                for (int d = 0; d < Dh; ++d) acc[d] *= r;
                for (int j = 0; j < n; ++j) {
                    if (mask[row * T + k0 + j] == 0) continue;
                    const float e = expf(s[j] - m_new);
                    l += e;
                    for (int d = 0; d < Dh; ++d) acc[d] += e * v_tile[j * Dh + d];
                }
                m = m_new;
            }
        }
        __syncthreads();  // everyone is done with the tile before the next load
    }
    if (mine) {
        for (int d = 0; d < Dh; ++d) out[row * Dh + d] = acc[d] / l;
        m_out[row] = m;
        l_out[row] = l;
    }
}

namespace {
std::string g_error;  // the last failure, for flash_error()
}

// What the grader calls (lessons/assignments/flash_kernel/cpp_adapter.py):
// arrays row-major float32 (the mask int32), out (T, Dh), m and l (T).
// Returns 0, or -2 with the message in flash_error() when the launch fails
// (the emulator names a race or an index out of range there).
extern "C" int flash_attention(const float* q, const float* k, const float* v, const int* mask,
                               int T, int Dh, int tile, float* out, float* m, float* l) {
    if (Dh > kMaxDh || tile > kMaxTile || tile < 1) {
        g_error = "Dh up to " + std::to_string(kMaxDh) + " and tile 1.." +
                  std::to_string(kMaxTile) + " only";
        return -2;
    }
    try {
        PLAB_LAUNCH(flash_kernel, (T + kRows - 1) / kRows, kRows, 0, q, k, v, mask, T, Dh, tile,
                    out, m, l);
        PLAB_CUDA_CHECK(cudaDeviceSynchronize());
    } catch (const std::exception& e) {
        g_error = e.what();
        return -2;
    }
    return 0;
}

extern "C" const char* flash_error() {
    return g_error.c_str();
}
