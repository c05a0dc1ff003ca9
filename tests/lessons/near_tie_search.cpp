// How lesson 16 found its near-ties: prompts that bring the model, at some
// step of its greedy continuation, to two tokens whose logits are closer than
// another order of the additions would round them (issue 48).
//
//   near_tie_search PROMPTS_FILE NEW_TOKENS [--top N] [--check] [--model DIR]
//
// Every prompt (one per line) is continued for NEW_TOKENS greedy tokens on
// the `cpu` backend with its invariant kernels, many requests to an engine;
// every sampled row's gap between its two largest logits is kept, and the N
// smallest are printed, "gap<TAB>step<TAB>prompt", smallest first. A gap of 0
// is an exact tie, which here comes from two tokens with identical classifier
// rows (any kernel ties them; they never turn). Lesson 16's file holds the
// prompts of the smallest gaps above 0 of a search of 200,000 random word
// sequences of assets/model/eval/heldout.txt, 64 tokens each.
//
// --check: each printed row is computed again, its prompt alone in an engine
// of its own, and its gap must come back to the bit — the invariant kernels'
// promise, and the search's bookkeeping of prompt and step (ctest
// near_tie_search_check).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "model/model_io.h"
#include "runtime/engine.h"

namespace {

using namespace plab;

struct NearTie {
    float gap = 0;
    int step = 0;
    std::string prompt;
};

float top2_gap(const std::vector<float>& row) {
    float first = -1e30f, second = -1e30f;
    for (float v : row) {
        if (v > first) {
            second = first;
            first = v;
        } else if (v > second) {
            second = v;
        }
    }
    return first - second;
}

RequestOptions greedy_logits(int new_tokens) {
    RequestOptions ro;
    ro.max_new_tokens = new_tokens;
    ro.keep_logits = true;
    ro.eos_id = -1;
    return ro;
}

// Every sampled row of every prompt, `batch` prompts to an engine (their
// rows kept only until the engine is done), the `top` smallest gaps kept.
std::vector<NearTie> search(const Model& m, const std::vector<std::string>& prompts, int new_tokens,
                            std::size_t top) {
    std::vector<NearTie> best;
    const std::size_t batch = 400;
    for (std::size_t b0 = 0; b0 < prompts.size(); b0 += batch) {
        EngineOptions eo;
        eo.backend = "cpu";
        eo.prefix_cache = false;
        Engine e(m.weights, eo);
        const std::size_t b1 = std::min(prompts.size(), b0 + batch);
        for (std::size_t i = b0; i < b1; ++i)
            e.add_request(m.tokenizer->encode(prompts[i], true), greedy_logits(new_tokens));
        e.run();
        for (int id = 0; id < e.num_requests(); ++id) {
            const auto& rows = e.request(id).logits;
            for (std::size_t t = 0; t < rows.size(); ++t)
                best.push_back({top2_gap(rows[t]), int(t), prompts[b0 + std::size_t(id)]});
        }
        std::stable_sort(best.begin(), best.end(),
                         [](const NearTie& a, const NearTie& b) { return a.gap < b.gap; });
        if (best.size() > top) best.resize(top);
    }
    return best;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr,
                     "usage: near_tie_search PROMPTS_FILE NEW_TOKENS [--top N] [--check] "
                     "[--model DIR]\n");
        return 2;
    }
    std::size_t top = 50;
    bool check = false;
    std::string model_path;
    for (int i = 3; i < argc; ++i) {
        if (std::strcmp(argv[i], "--top") == 0 && i + 1 < argc) {
            top = std::stoul(argv[++i]);
        } else if (std::strcmp(argv[i], "--check") == 0) {
            check = true;
        } else if (std::strcmp(argv[i], "--model") == 0 && i + 1 < argc) {
            model_path = argv[++i];
        } else {
            std::fprintf(stderr, "near_tie_search: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    try {
        const Model m = load_model_or_default(model_path);
        std::ifstream in(argv[1]);
        if (!in) throw Error(std::string("cannot read ") + argv[1]);
        std::vector<std::string> prompts;
        for (std::string l; std::getline(in, l);)
            if (!l.empty()) prompts.push_back(l);
        const int new_tokens = std::stoi(argv[2]);
        const std::vector<NearTie> best = search(m, prompts, new_tokens, top);
        int failed = 0;
        for (const NearTie& t : best) {
            std::printf("%.3g\t%d\t%s\n", t.gap, t.step, t.prompt.c_str());
            if (!check) continue;
            Engine alone(m.weights, EngineOptions{});
            const int id =
                alone.add_request(m.tokenizer->encode(t.prompt, true), greedy_logits(t.step + 1));
            alone.run();
            const float again = top2_gap(alone.request(id).logits.at(std::size_t(t.step)));
            if (std::memcmp(&again, &t.gap, sizeof again) != 0) {
                std::fprintf(stderr,
                             "near_tie_search: '%s' step %d: gap %.9g alone, %.9g in the "
                             "search\n",
                             t.prompt.c_str(), t.step, again, t.gap);
                ++failed;
            }
        }
        if (check)
            std::fprintf(stderr, "near_tie_search: %zu rows computed again alone, %d differ\n",
                         best.size(), failed);
        return failed == 0 ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "near_tie_search: %s\n", e.what());
        return 1;
    }
}
