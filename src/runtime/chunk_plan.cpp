#include "runtime/chunk_plan.h"

#include <charconv>
#include <numeric>

#include "core/error.h"

namespace plab {

int ChunkPlan::n_tokens() const {
    return std::accumulate(lengths.begin(), lengths.end(), 0);
}

std::vector<int> ChunkPlan::starts() const {
    std::vector<int> s{0};
    for (int len : lengths) s.push_back(s.back() + len);
    return s;
}

std::string ChunkPlan::to_string() const {
    std::string s;
    for (std::size_t i = 0; i < lengths.size(); ++i) {
        if (i > 0) s += ',';
        s += std::to_string(lengths[i]);
    }
    return s;
}

ChunkPlan fixed_chunk_plan(int n_tokens, int size) {
    PLAB_CHECK(size >= 1, "chunk size " << size << " must be at least 1");
    ChunkPlan p;
    for (int done = 0; done < n_tokens; done += size)
        p.lengths.push_back(std::min(size, n_tokens - done));
    return p;
}

ChunkPlan parse_chunk_plan(std::string_view text, int n_tokens) {
    PLAB_CHECK(n_tokens >= 1, "cannot plan chunks for an empty prompt");
    const std::string hint =
        "; expected 'full', one chunk size like '4', or lengths like '3,1,4' summing to the "
        "prompt's " +
        std::to_string(n_tokens) + " tokens";
    PLAB_CHECK(!text.empty(), "empty chunk plan" << hint);
    if (text == "full") return ChunkPlan{{n_tokens}};
    std::vector<int> lengths;
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t comma = text.find(',', start);
        const std::string_view part = text.substr(
            start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
        long value = 0;
        const auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
        PLAB_CHECK(!part.empty() && ec == std::errc() && ptr == part.data() + part.size(),
                   "chunk plan '" << text << "': '" << part << "' is not a whole number" << hint);
        PLAB_CHECK(value >= 1, "chunk plan '" << text << "': chunk length " << value
                                              << " must be at least 1" << hint);
        // A chunk *size* larger than the prompt is one chunk; a listed length cannot be.
        PLAB_CHECK(value <= n_tokens || (start == 0 && comma == std::string_view::npos),
                   "chunk plan '" << text << "': chunk length " << value
                                  << " is longer than the prompt" << hint);
        lengths.push_back(static_cast<int>(value));
        if (comma == std::string_view::npos) break;
        start = comma + 1;
    }
    if (lengths.size() == 1) return fixed_chunk_plan(n_tokens, lengths[0]);
    ChunkPlan p{lengths};
    PLAB_CHECK(p.n_tokens() == n_tokens,
               "chunk plan '" << text << "' sums to " << p.n_tokens() << " tokens" << hint);
    return p;
}

std::vector<ChunkPlan> all_chunk_plans(int n_tokens) {
    PLAB_CHECK(n_tokens >= 1 && n_tokens <= 20, "all_chunk_plans: 1..20 tokens (2^(T-1) plans)");
    std::vector<ChunkPlan> plans;
    // Bit i of `cuts` set = a chunk boundary after token i.
    for (unsigned cuts = 0; cuts < (1u << (n_tokens - 1)); ++cuts) {
        ChunkPlan p;
        int len = 1;
        for (int i = 0; i < n_tokens - 1; ++i) {
            if (cuts & (1u << i)) {
                p.lengths.push_back(len);
                len = 1;
            } else {
                ++len;
            }
        }
        p.lengths.push_back(len);
        plans.push_back(std::move(p));
    }
    return plans;
}

}  // namespace plab
