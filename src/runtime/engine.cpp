#include "runtime/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "runtime/registry.h"

namespace plab {
namespace {

using Clock = std::chrono::steady_clock;

double clock_us() {
    return std::chrono::duration<double, std::micro>(Clock::now().time_since_epoch()).count();
}

// The model's identity for the prefix cache: its shape and its token
// embeddings (every token's first contact with the model). Two models that
// differ there never share a block name; the pool belongs to one engine and
// one model anyway, so this is the salt vLLM keeps for pools shared wider.
std::uint64_t model_identity(const Weights& w) {
    const ModelConfig& c = w.config;
    std::vector<int32_t> words = {c.dim,        c.n_layers,    c.n_heads,
                                  c.n_kv_heads, c.head_dim,    c.hidden_dim,
                                  c.vocab_size, c.max_seq_len, c.tied_embeddings ? 1 : 0};
    std::int32_t bits = 0;
    std::memcpy(&bits, &c.norm_eps, sizeof bits);
    words.push_back(bits);
    std::uint64_t h = KvCache::block_hash(0, words, 0);
    // Hash the embeddings in chunks of 4096 floats, chained like blocks.
    const std::size_t n = w.tok_embeddings.size();
    for (std::size_t i = 0; i < n; i += 4096) {
        const std::size_t m = std::min<std::size_t>(4096, n - i);
        std::vector<int32_t> chunk(m);
        std::memcpy(chunk.data(), w.tok_embeddings.data() + i, m * sizeof(float));
        h = KvCache::block_hash(h, chunk, 0);
    }
    return h;
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    // Nearest rank: the smallest value with at least p of the values at or below it.
    const std::size_t rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace

RequestLatency latency_of(const Request& r) {
    RequestLatency l;
    if (r.token_us.empty()) return l;
    l.ttft_ms = (r.token_us.front() - r.arrival_us) / 1000;
    l.e2e_ms = (r.token_us.back() - r.arrival_us) / 1000;
    std::vector<double> gaps;
    for (std::size_t i = 1; i < r.token_us.size(); ++i)
        gaps.push_back((r.token_us[i] - r.token_us[i - 1]) / 1000);
    if (!gaps.empty()) {
        double sum = 0;
        for (double g : gaps) sum += g;
        l.itl_mean_ms = sum / static_cast<double>(gaps.size());
        l.itl_p90_ms = percentile(gaps, 0.9);
        l.tpot_ms = (l.e2e_ms - l.ttft_ms) / static_cast<double>(gaps.size());
    }
    return l;
}

Engine::Engine(const Weights& weights, EngineOptions options, Trace* trace)
    : options_(std::move(options)), trace_(trace) {
    PLAB_CHECK(options_.block_size >= 1 && options_.block_size <= 4096,
               "KV block size " << options_.block_size << " must be between 1 and 4096 positions");
    PLAB_CHECK(options_.kv_blocks >= 0, "the KV pool needs at least one block, got "
                                            << options_.kv_blocks
                                            << " (0 picks a pool for 4 full-length sequences)");
    PLAB_CHECK(options_.max_step_tokens >= 1,
               "the step token budget " << options_.max_step_tokens << " must be at least 1");
    PLAB_CHECK(options_.max_running >= 1,
               "max running sequences " << options_.max_running << " must be at least 1");
    t0_ = clock_us();
    backend_ = make_backend(options_.backend);
    model_ = std::make_unique<DeviceModel>(*backend_, weights);
    salt_ = model_identity(weights);
}

Engine::~Engine() {
    // Blocks go back before the pool itself goes (the pool's arrays are the backend's).
    if (cache_) {
        for (auto& r : requests_) cache_->release(r->seq);
    }
    ws_.reset();
    cache_.reset();
    model_.reset();
}

double Engine::now_us() const {
    return clock_us() - t0_;
}

KvCache& Engine::pool() {
    if (!cache_) {
        const ModelConfig& c = model_->config();
        const int per_seq = (c.max_seq_len + options_.block_size - 1) / options_.block_size;
        const int blocks = options_.kv_blocks > 0 ? options_.kv_blocks : 4 * per_seq;
        cache_ = std::make_unique<KvCache>(*backend_, c, options_.block_size, blocks);
        // The activations of the largest step, allocated before any step is timed.
        ws_ = std::make_unique<Workspace>(*backend_);
        ws_->ensure(c, options_.max_step_tokens);
        ws_->ensure_logits(std::min(options_.max_step_tokens, options_.max_running), c.vocab_size);
    }
    return *cache_;
}

const KvCache& Engine::cache() const {
    PLAB_CHECK(cache_ != nullptr, "the engine's KV pool is made by its first request");
    return *cache_;
}

PoolStats Engine::pool_stats() const {
    PoolStats s;
    s.block_size = options_.block_size;
    s.hit_blocks = hit_blocks_;
    s.miss_blocks = miss_blocks_;
    s.preemptions = preemptions_;
    if (cache_) {
        s.num_blocks = cache_->num_blocks();
        s.blocks_in_use = cache_->blocks_in_use();
        s.cached_free_blocks = cache_->cached_free_blocks();
        s.free_blocks = cache_->free_blocks();
        s.evictions = cache_->counters().evictions;
    }
    return s;
}

int Engine::add_request(std::vector<int32_t> prompt, RequestOptions options) {
    const ModelConfig& c = model_->config();
    const int id = static_cast<int>(requests_.size());
    PLAB_CHECK(!prompt.empty(), "request " << id << ": empty prompt; give at least one token");
    for (std::size_t i = 0; i < prompt.size(); ++i) {
        PLAB_CHECK(prompt[i] >= 0 && prompt[i] < c.vocab_size,
                   "request " << id << ": token id " << prompt[i] << " at position " << i
                              << " is out of range; valid ids are 0.." << c.vocab_size - 1);
    }
    const int n_prompt = static_cast<int>(prompt.size());
    PLAB_CHECK(n_prompt <= c.max_seq_len, "request " << id << ": prompt of " << n_prompt
                                                     << " tokens exceeds max_seq_len "
                                                     << c.max_seq_len << "; shorten it");
    PLAB_CHECK(options.max_new_tokens >= 1, "request " << id << ": max_new_tokens "
                                                       << options.max_new_tokens
                                                       << " must be at least 1");
    options.sampler.validate();
    auto r = std::make_unique<Request>(options.sampler);
    r->id = id;
    // As runtime/generate.cpp: at least the first token, then as many as fit.
    r->new_limit = std::max(1, std::min(options.max_new_tokens, c.max_seq_len - n_prompt));
    // The most positions it will hold: the last new token is never fed back.
    const int positions = n_prompt + r->new_limit - 1;
    const int limit = options.mask.limit();
    PLAB_CHECK(limit == 0 || positions <= limit,
               "request " << id << ": mask '" << options.mask.spec() << "' covers positions 0.."
                          << limit - 1 << " but the request needs " << positions);
    KvCache& cache = pool();
    const int B = cache.block_size();
    const int blocks = (positions + B - 1) / B;
    PLAB_CHECK(blocks <= cache.num_blocks(),
               "request " << id << " needs " << blocks << " KV blocks of " << B << " positions ("
                          << n_prompt << " prompt + " << r->new_limit - 1
                          << " fed-back new tokens) but the whole pool has " << cache.num_blocks()
                          << "; give --kv-blocks " << blocks << " or more");
    r->options = std::move(options);
    r->prompt = std::move(prompt);
    r->tokens = r->prompt;
    r->seq.id = id;
    r->arrival_us = now_us();
    waiting_.push_back(r.get());
    requests_.push_back(std::move(r));
    return id;
}

bool Engine::uses_prefix_cache(const Request& r) const {
    return options_.prefix_cache && r.options.mask.is_causal();
}

void Engine::preempt(Request& r, StepRecord& record) {
    // Recompute policy: drop its blocks (named ones stay cached and may even
    // be hit when it comes back) and compute its tokens again later.
    cache_->release(r.seq);
    r.state = RequestState::waiting;
    running_.erase(std::find(running_.begin(), running_.end(), &r));
    waiting_.push_front(&r);
    ++r.preemptions;
    ++preemptions_;
    record.preempted.push_back(r.id);
    if (trace_ != nullptr) {
        trace_->instant("preempt", "engine",
                        {{"request", std::to_string(r.id)},
                         {"tokens", std::to_string(r.tokens.size())},
                         {"blocks_in_use", std::to_string(cache_->blocks_in_use())}});
    }
}

void Engine::finish(Request& r, StepRecord& record) {
    cache_->release(r.seq);
    r.state = RequestState::finished;
    r.finish_us = now_us();
    running_.erase(std::find(running_.begin(), running_.end(), &r));
    record.finished.push_back(r.id);
}

const StepRecord& Engine::step() {
    PLAB_CHECK(has_unfinished(), "step() with no unfinished request");
    KvCache& cache = pool();
    const int B = cache.block_size();
    StepRecord rec;
    rec.index = static_cast<int>(steps_.size());
    rec.start_us = now_us();
    const double trace_t0 = trace_ ? trace_->now_us() : 0;

    int budget = options_.max_step_tokens;
    std::vector<Scheduled> picks;
    std::vector<std::vector<int32_t>> slots;
    // Positions are reserved while scheduling, and full blocks named at once,
    // so a request admitted later in this step finds them in the prefix cache:
    // within a layer every K/V of the step is appended before any attention
    // reads, so it reads them computed.
    auto take = [&](Request& r, int n) {
        slots.push_back(cache.reserve(r.seq, n));
        if (uses_prefix_cache(r)) cache.name_full_blocks(r.seq, r.tokens, salt_);
        picks.push_back({&r, n});
        budget -= n;
    };

    // 1. Running requests, oldest first: a decode token each, or the next
    //    chunk of a prompt longer than one step's budget. When the pool has no
    //    block for one, the newest running request is preempted (maybe itself).
    for (std::size_t i = 0; i < running_.size() && budget > 0;) {
        Request& r = *running_[i];
        const int n = std::min(static_cast<int>(r.tokens.size()) - r.seq.length, budget);
        bool preempted_self = false;
        while (cache.new_blocks_for(r.seq, n) > cache.free_blocks()) {
            Request* victim = running_.back();
            preempt(*victim, rec);
            if (victim == &r) {
                preempted_self = true;
                break;
            }
        }
        if (preempted_self) break;
        take(r, n);
        ++i;
    }
    // 2. Waiting requests, first come first served, while the budget, the
    //    running limit and the pool allow — not in a step that had to preempt.
    while (rec.preempted.empty() && budget > 0 && !waiting_.empty() &&
           static_cast<int>(running_.size()) < options_.max_running) {
        Request& r = *waiting_.front();
        const int len = static_cast<int>(r.tokens.size());
        // Only the first len-1 tokens are looked up: the last one is always
        // computed, because its logits give the next token (as vLLM does). So
        // a prompt of k·B+1 tokens seen before computes exactly one token.
        std::vector<int> hits;
        if (uses_prefix_cache(r)) {
            hits = cache.match_prefix(
                std::span<const int32_t>(r.tokens).first(std::size_t(len - 1)), salt_);
        }
        const int cached = static_cast<int>(hits.size()) * B;
        const int n = std::min(len - cached, budget);
        int hits_on_free = 0;  // cached free blocks leave the free count when shared
        for (int b : hits) hits_on_free += cache.ref_count(b) == 0 ? 1 : 0;
        const int new_blocks = (cached + n + B - 1) / B - static_cast<int>(hits.size());
        if (new_blocks + hits_on_free > cache.free_blocks()) break;
        waiting_.pop_front();
        cache.share_prefix(r.seq, hits);
        if (!r.admitted_once) {
            r.admitted_once = true;
            r.cached_tokens = cached;
            r.hit_blocks = static_cast<int>(hits.size());
            r.miss_blocks = uses_prefix_cache(r) ? (len - 1) / B - r.hit_blocks : 0;
            hit_blocks_ += r.hit_blocks;
            miss_blocks_ += r.miss_blocks;
        }
        r.state = RequestState::running;
        running_.push_back(&r);
        take(r, n);
    }
    PLAB_CHECK(!picks.empty(),
               "the engine could schedule nothing: a request needs more blocks "
               "than the pool can free");

    // 3. One forward step over every picked sequence.
    std::vector<StepItem> items;
    items.reserve(picks.size());
    for (std::size_t i = 0; i < picks.size(); ++i) {
        Request& r = *picks[i].request;
        const int n = picks[i].n_tokens;
        const int first = r.seq.length - n;
        items.push_back({&r.seq, std::span<const int32_t>(r.tokens).subspan(std::size_t(first), n),
                         r.options.mask.view(), slots[i]});
        rec.requests.push_back(r.id);
        // A decode token: the request is past its prompt and feeds back its newest token.
        const bool decode = n == 1 && first + 1 == static_cast<int>(r.tokens.size()) &&
                            first >= static_cast<int>(r.prompt.size());
        (decode ? rec.decode_tokens : rec.prefill_tokens) += n;
        r.computed_tokens += n;
    }
    const ChunkOutput out = forward_step(*model_, cache, items, *ws_, {}, trace_);

    // 4. A request whose known tokens are all computed samples its next one
    //    from its last position's logits; done at EOS or at its limit.
    const std::size_t V = static_cast<std::size_t>(model_->config().vocab_size);
    for (std::size_t i = 0; i < picks.size(); ++i) {
        Request& r = *picks[i].request;
        if (!r.options.mask.is_causal()) cache.free_forgotten(r.seq, r.options.mask.view());
        if (r.seq.length < static_cast<int>(r.tokens.size())) continue;  // prompt not done
        const std::vector<float> logits(
            out.logits.begin() + static_cast<std::ptrdiff_t>(i * V),
            out.logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * V));
        const int32_t token = r.sampler.sample(logits);
        if (r.options.keep_logits) r.logits.push_back(logits);
        r.tokens.push_back(token);
        r.token_us.push_back(now_us());
        const int made = static_cast<int>(r.tokens.size() - r.prompt.size());
        if (r.options.eos_id >= 0 && token == r.options.eos_id) {
            r.finish_reason = "eos";
            finish(r, rec);
        } else if (made >= r.new_limit) {
            r.finish_reason = "length";
            finish(r, rec);
        }
    }
    backend_->synchronize();
    rec.us = now_us() - rec.start_us;
    rec.blocks_in_use = cache.blocks_in_use();
    rec.cached_free_blocks = cache.cached_free_blocks();
    if (trace_ != nullptr) {
        trace_->span("step", "engine", trace_t0,
                     {{"step", std::to_string(rec.index)},
                      {"sequences", std::to_string(rec.requests.size())},
                      {"prefill_tokens", std::to_string(rec.prefill_tokens)},
                      {"decode_tokens", std::to_string(rec.decode_tokens)},
                      {"blocks_in_use", std::to_string(rec.blocks_in_use)}});
    }
    steps_.push_back(std::move(rec));
    return steps_.back();
}

void Engine::run() {
    while (has_unfinished()) step();
}

}  // namespace plab
