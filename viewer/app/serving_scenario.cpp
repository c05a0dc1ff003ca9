// Serving scenario: see serving_scenario.h. Lessons: 2 (the KV cache, here
// shared by several requests) and 5 (TTFT, here of several requests).
#include "app/serving_scenario.h"

#include <algorithm>
#include <map>
#include <string_view>

#include "core/error.h"
#include "core/kv_layout.h"
#include "runtime/engine.h"
#include "trace/trace.h"

namespace plab::viewer {
namespace {

// 1. The requests ----------------------------------------------------------------
struct Continuation {
    const char* text;
    int max_new_tokens;
};
// Each continues the shared prompt; different lengths and new-token counts, so
// the requests finish at different steps.
constexpr Continuation kContinuations[] = {
    {" Emma read a book about a dragon.", 10},
    {" Ivy asked the old man for help.", 14},
    {" The clock rang three times, and", 18},
};
constexpr Continuation kOtherPrompt = {"Tom and his dog ran to the park to play.", 6};

int common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    const std::size_t n = std::min(a.size(), b.size());
    std::size_t i = 0;
    while (i < n && a[i] == b[i]) ++i;
    return static_cast<int>(i);
}

// "3-7" -> {3, 7}; "12" -> {12, 12}.
std::pair<int, int> parse_range(const std::string& text) {
    const std::size_t dash = text.find('-');
    if (dash == std::string::npos) return {std::stoi(text), std::stoi(text)};
    return {std::stoi(text.substr(0, dash)), std::stoi(text.substr(dash + 1))};
}

std::vector<int> parse_ints(const std::string& text) {
    std::vector<int> out;
    std::size_t start = 0;
    while (start < text.size()) {
        std::size_t comma = text.find(',', start);
        if (comma == std::string::npos) comma = text.size();
        out.push_back(std::stoi(text.substr(start, comma - start)));
        start = comma + 1;
    }
    return out;
}

std::string arg(const TraceEvent& e, const char* key) {
    const auto it = e.args.find(key);
    PLAB_ASSERT(it != e.args.end());
    return it->second;
}

// 2. One stage: the engine's state after a step -------------------------------------
struct Before {
    std::vector<int> reached;  // the most positions each request ever had computed
};

// The step's work, from its "kv append" trace events of layer 0: which request
// wrote which positions into which blocks (a step with one sequence leaves the
// sequence out of the event: it is the step's only request).
std::vector<ServingSpan> spans_of(const StepRecord& rec, const std::vector<TraceEvent>& events,
                                  std::size_t first_event, Before& before) {
    std::vector<ServingSpan> spans;
    for (std::size_t i = first_event; i < events.size(); ++i) {
        const TraceEvent& e = events[i];
        if (e.name != "kv append" || arg(e, "layer") != "0") continue;
        ServingSpan s;
        const auto seq = e.args.find("sequence");
        PLAB_ASSERT(seq != e.args.end() || rec.requests.size() == 1);
        s.request = seq != e.args.end() ? std::stoi(seq->second) : rec.requests.front();
        const auto [first, last] = parse_range(arg(e, "positions"));
        s.first_pos = first;
        s.n_pos = last - first + 1;
        s.blocks = parse_ints(arg(e, "blocks"));
        const std::size_t id = static_cast<std::size_t>(s.request);
        // Decode or prompt chunk: the engine's StepRecord says, for each of
        // the step's requests (a request is in a step at most once).
        const auto at = std::find(rec.requests.begin(), rec.requests.end(), s.request);
        PLAB_ASSERT(at != rec.requests.end());
        const std::size_t k = static_cast<std::size_t>(at - rec.requests.begin());
        PLAB_ASSERT(rec.tokens[k] == s.n_pos);
        s.decode = rec.decode[k];
        s.recompute = first < before.reached[id];
        before.reached[id] = std::max(before.reached[id], last + 1);
        spans.push_back(std::move(s));
    }
    return spans;
}

ServingStage capture(const Engine& engine, const ServingStage* prev,
                     std::vector<ServingSpan> spans) {
    const KvCache& cache = engine.cache();
    ServingStage st;
    st.pool = engine.pool_stats();
    st.evictions = st.pool.evictions - (prev ? prev->pool.evictions : 0);
    st.spans = std::move(spans);
    st.blocks.resize(static_cast<std::size_t>(cache.blocks().num_blocks()));
    for (int b = 0; b < cache.blocks().num_blocks(); ++b) {
        PoolBlock& blk = st.blocks[static_cast<std::size_t>(b)];
        blk.ref_count = cache.blocks().ref_count(b);
        blk.named = cache.blocks().is_cached(b);
        blk.state = blk.ref_count > 0 ? PoolBlockState::kInUse
                    : blk.named       ? PoolBlockState::kCachedFree
                                      : PoolBlockState::kFree;
    }
    // Owners: every request's block table, as the engine holds it.
    for (int id = 0; id < engine.num_requests(); ++id) {
        const Request& r = engine.request(id);
        ServingRequestState rs;
        rs.state = r.state;
        rs.length = r.seq.length;
        rs.n_tokens = static_cast<int>(r.tokens.size());
        rs.block_table = r.seq.block_table;
        rs.preemptions = r.preemptions;
        for (std::size_t lb = 0; lb < r.seq.block_table.size(); ++lb) {
            const int32_t b = r.seq.block_table[lb];
            if (b == kFreedBlock) continue;
            PoolBlock& blk = st.blocks[static_cast<std::size_t>(b)];
            blk.owners.push_back(id);
            blk.logical.push_back(static_cast<int>(lb));
        }
        st.requests.push_back(std::move(rs));
    }
    // Written this step, and who wrote it (a request that finished in this
    // step has given its blocks back already: the trace still names them).
    std::map<int, std::pair<int, int>> writer;  // block -> (request, logical block)
    const int B = cache.blocks().block_size();
    for (const ServingSpan& s : st.spans)
        for (std::size_t k = 0; k < s.blocks.size(); ++k)
            writer[s.blocks[k]] = {s.request, s.first_pos / B + static_cast<int>(k)};
    for (int b = 0; b < cache.blocks().num_blocks(); ++b) {
        PoolBlock& blk = st.blocks[static_cast<std::size_t>(b)];
        const PoolBlock* old = prev ? &prev->blocks[static_cast<std::size_t>(b)] : nullptr;
        const auto w = writer.find(b);
        blk.written = w != writer.end();
        // A named block is full: nothing appends to it until it is evicted and
        // handed out again. So a write into a block named before the step is
        // an eviction (the pool's counter must agree: self_check.cpp).
        blk.evicted = blk.written && old != nullptr && old->named;
        if (blk.evicted) {
            blk.evicted_content = old->content;
            blk.evicted_logical = old->content_logical;
        }
        blk.hit = !blk.written && old != nullptr && old->state == PoolBlockState::kCachedFree &&
                  blk.state == PoolBlockState::kInUse;
        if (!blk.owners.empty()) {
            blk.content = blk.owners;
            blk.content_logical = blk.logical.front();
        } else if (blk.written) {
            blk.content = {w->second.first};
            blk.content_logical = w->second.second;
        } else if (old != nullptr) {
            blk.content = old->content;
            blk.content_logical = old->content_logical;
        }
    }
    return st;
}

}  // namespace

// 3. The scenario ----------------------------------------------------------------------
std::vector<ServingRequestSpec> serving_requests(const Tokenizer& tok,
                                                 const std::vector<int32_t>& prefix) {
    PLAB_CHECK(!prefix.empty(), "the shared prompt is empty; type a prompt in the bar");
    std::vector<ServingRequestSpec> out;
    for (const Continuation& c : kContinuations) {
        ServingRequestSpec r;
        r.label = "shares the prompt";
        r.prompt = prefix;
        const std::vector<int32_t> more = tok.encode(c.text, /*add_bos=*/false);
        r.prompt.insert(r.prompt.end(), more.begin(), more.end());
        r.max_new_tokens = c.max_new_tokens;
        out.push_back(std::move(r));
    }
    ServingRequestSpec other;
    other.label = "a prompt of its own";
    other.prompt = tok.encode(kOtherPrompt.text, /*add_bos=*/true);
    other.max_new_tokens = kOtherPrompt.max_new_tokens;
    // Second in line: it runs beside the first and finishes early, leaving
    // cached free blocks that the others later evict.
    out.insert(out.begin() + 1, std::move(other));
    return out;
}

int serving_pool_blocks(const std::vector<ServingRequestSpec>& requests, int max_seq_len,
                        const ServingOptions& options) {
    if (options.kv_blocks > 0) return options.kv_blocks;
    const int B = options.block_size;
    auto blocks = [B](int positions) { return (positions + B - 1) / B; };
    // Every prompt at once, a full block of a common prefix counted once (the
    // prefix cache shares it): room to run the requests side by side, none for
    // the blocks their new tokens add — so decoding runs the pool dry.
    int prompts = 0, largest = 0;
    for (std::size_t i = 0; i < requests.size(); ++i) {
        const std::vector<int32_t>& p = requests[i].prompt;
        const int n_prompt = static_cast<int>(p.size());
        int shared = 0;
        for (std::size_t j = 0; j < i; ++j)
            shared = std::max(shared, common_prefix(p, requests[j].prompt));
        prompts += blocks(n_prompt) - shared / B;
        // As Engine::add_request: the last new token is never fed back.
        const int new_limit =
            std::max(1, std::min(requests[i].max_new_tokens, max_seq_len - n_prompt));
        largest = std::max(largest, blocks(n_prompt + new_limit - 1));
    }
    // A pool smaller than one request is refused by the engine.
    return std::max(largest, prompts);
}

ServingSnapshot run_serving_scenario(const Weights& weights, const Tokenizer& tok,
                                     const std::vector<ServingRequestSpec>& requests,
                                     const ServingOptions& options) {
    ServingSnapshot out;
    EngineOptions eo;
    eo.backend = options.backend;
    eo.block_size = options.block_size;
    eo.kv_blocks = serving_pool_blocks(requests, weights.config.max_seq_len, options);
    eo.prefix_cache = options.prefix_cache;
    eo.max_step_tokens = options.max_step_tokens;
    Trace trace;  // the steps' "kv append" events say who wrote which block
    Engine engine(weights, eo, &trace);
    out.backend = engine.backend().name();
    out.block_size = eo.block_size;
    out.max_step_tokens = eo.max_step_tokens;
    out.prefix_cache = eo.prefix_cache;

    Before before;
    for (const ServingRequestSpec& spec : requests) {
        RequestOptions ro;
        ro.max_new_tokens = spec.max_new_tokens;  // greedy, no early stop: a fixed picture
        engine.add_request(spec.prompt, ro);
        before.reached.push_back(0);
    }
    out.num_blocks = engine.cache().blocks().num_blocks();
    out.stages.push_back(capture(engine, nullptr, {}));
    out.stages.back().record.index = -1;

    // 1. Step by step: each stage copies the engine's state after its step.
    while (engine.has_unfinished()) {
        const std::size_t first_event = trace.events().size();
        const StepRecord& rec = engine.step();
        std::vector<ServingSpan> spans = spans_of(rec, trace.events(), first_event, before);
        ServingStage st = capture(engine, &out.stages.back(), std::move(spans));
        st.record = rec;
        out.stages.push_back(std::move(st));
    }

    // 2. Each request as it finished.
    for (int id = 0; id < engine.num_requests(); ++id) {
        const Request& r = engine.request(id);
        const ServingRequestSpec& spec = requests[static_cast<std::size_t>(id)];
        ServingRequestInfo info;
        info.label = spec.label;
        info.n_prompt = static_cast<int>(r.prompt.size());
        for (int other = 0; other < engine.num_requests(); ++other)
            if (other != id)
                info.shared_prefix = std::max(
                    info.shared_prefix, common_prefix(r.prompt, engine.request(other).prompt));
        for (int32_t t : r.tokens) info.token_text.push_back(tok.token_text(t));
        const std::span<const int32_t> made = r.new_tokens();
        info.output_text = tok.decode(std::vector<int32_t>(made.begin(), made.end()));
        info.record = record_of(r);
        info.latency = info.record.latency();
        out.requests.push_back(std::move(info));
    }
    out.prefix_tokens = 0;
    for (const ServingRequestInfo& info : out.requests)
        out.prefix_tokens = std::max(out.prefix_tokens, info.shared_prefix);
    return out;
}

int shared_blocks(const ServingStage& stage) {
    int n = 0;
    for (const PoolBlock& b : stage.blocks) n += b.ref_count > 1 ? 1 : 0;
    return n;
}

int opening_stage(const ServingSnapshot& sv) {
    int best = 0, most = 0;
    for (std::size_t k = 0; k < sv.stages.size(); ++k) {
        const int n = shared_blocks(sv.stages[k]);
        if (n > most) {
            most = n;
            best = static_cast<int>(k);
        }
    }
    return best;
}

}  // namespace plab::viewer
