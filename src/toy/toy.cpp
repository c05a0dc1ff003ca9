#include "toy/toy.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/attention_shape.h"
#include "core/error.h"
#include "core/kv_layout.h"
#include "runtime/mask_grammar.h"

namespace plab {
namespace {

constexpr int kToyBlockSize = 2;  // small blocks, so even 4 positions span two of them

}  // namespace

void ToyInput::validate() const {
    const std::size_t n = values.size();
    PLAB_CHECK(n >= 1 && n <= 64, "toy: " << n << " values; give 1 to 64 numbers");
    PLAB_CHECK(queries.size() == n && keys.size() == n,
               "toy: " << queries.size() << " queries, " << keys.size() << " keys and " << n
                       << " values; give one of each per position");
    for (const auto* v : {&queries, &keys, &values}) {
        for (float x : *v) {
            PLAB_CHECK(std::isfinite(x) && std::fabs(x) <= 1e6f,
                       "toy: " << x << " is not a finite number of magnitude <= 1e6");
        }
    }
}

ToyRun run_toy(Backend& backend, const ToyInput& input, const ChunkPlan& plan, const Mask& mask) {
    input.validate();
    const int n = input.n_tokens();
    PLAB_CHECK(plan.n_tokens() == n, "toy: chunk plan " << plan.to_string() << " covers "
                                                        << plan.n_tokens() << " positions, not "
                                                        << n);
    check_plan_for_mask(mask, plan);
    // One head, head dimension 1: q, k and v of a position are single numbers.
    const int n_blocks = (n + kToyBlockSize - 1) / kToyBlockSize;
    DeviceArray k_pool(backend, std::size_t(n_blocks) * kToyBlockSize);
    DeviceArray v_pool(backend, std::size_t(n_blocks) * kToyBlockSize);
    // A deliberately scrambled block table: logical block i lives in physical
    // block n_blocks-1-i, to show that attention follows the table.
    std::vector<int32_t> block_table(static_cast<std::size_t>(n_blocks));
    for (int i = 0; i < n_blocks; ++i) block_table[i] = n_blocks - 1 - i;

    ToyRun run;
    run.plan = plan;
    run.outputs.assign(static_cast<std::size_t>(n), 0.0f);
    run.probs.assign(std::size_t(n) * n, 0.0f);
    int pos0 = 0;
    for (int len : plan.lengths) {
        DeviceArray q(backend, len), k(backend, len), v(backend, len), out(backend, len);
        DeviceArray probs(backend, std::size_t(len) * (pos0 + len));
        backend.upload(q.buf(), input.queries.data() + pos0, len);
        backend.upload(k.buf(), input.keys.data() + pos0, len);
        backend.upload(v.buf(), input.values.data() + pos0, len);
        std::vector<int32_t> slots;
        for (int p = pos0; p < pos0 + len; ++p)
            slots.push_back(kv_slot(block_table.data(), p, kToyBlockSize));
        backend.kv_append(k_pool.buf(), v_pool.buf(), k.buf(), v.buf(), slots, 1);

        // One head of dimension 1: the score scale 1/sqrt(Dh) is 1.
        const AttentionShape s = attention_shape(len, pos0, 1, 1, 1, kToyBlockSize, mask);
        const std::span<const int32_t> table(
            block_table.data(), std::size_t((pos0 + len + kToyBlockSize - 1) / kToyBlockSize));
        backend.attention(out.buf(), q.buf(), k_pool.buf(), v_pool.buf(), table, s);
        backend.attention_probs(probs.buf(), Buffer{}, q.buf(), k_pool.buf(), table, s, 0);
        backend.download(run.outputs.data() + pos0, out.buf(), len);
        std::vector<float> p(std::size_t(len) * (pos0 + len));
        backend.download(p.data(), probs.buf(), p.size());
        for (int i = 0; i < len; ++i) {
            std::copy_n(p.begin() + std::size_t(i) * (pos0 + len), pos0 + len,
                        run.probs.begin() + std::size_t(pos0 + i) * n);
        }
        pos0 += len;
    }
    return run;
}

std::string toy_exact_output(const ToyInput& input, int position, const Mask& mask) {
    // Equal scores q_p·k_j for all visible j make every weight 1/(number visible):
    // the output is a mean. ALiBi makes the scores unequal on purpose.
    if (mask.alibi) return "";
    std::vector<int> seen;
    for (int j = 0; j < input.n_tokens(); ++j) {
        if (mask.visible(position, j)) seen.push_back(j);
    }
    if (seen.empty()) return "";
    long long sum = 0;
    for (int j : seen) {
        if (input.queries[position] * input.keys[j] !=
            input.queries[position] * input.keys[seen[0]])
            return "";
        if (input.values[j] != std::floor(input.values[j])) return "";
        sum += static_cast<long long>(input.values[j]);
    }
    long long den = static_cast<long long>(seen.size());
    const long long g = std::gcd(sum < 0 ? -sum : sum, den);
    const long long num = g > 0 ? sum / g : sum;
    den = g > 0 ? den / g : den;
    std::string frac =
        den == 1 ? std::to_string(num) : std::to_string(num) + "/" + std::to_string(den);
    const bool contiguous = seen.back() - seen.front() + 1 == static_cast<int>(seen.size());
    std::string which;
    if (contiguous) {
        which = "v" + std::to_string(seen.front()) + "..v" + std::to_string(seen.back());
    } else {
        for (int j : seen) which += (which.empty() ? "v" : ",v") + std::to_string(j);
    }
    return frac + " = mean of " + which;
}

}  // namespace plab
