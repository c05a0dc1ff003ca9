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

}  // namespace

Engine::Engine(const Weights& weights, EngineOptions options, Trace* trace)
    : options_(std::move(options)),
      trace_(trace),
      owned_(load_checked(weights, options_)),
      loaded_(owned_.get()) {
    t0_ = clock_us();
}

Engine::Engine(const LoadedModel& model, EngineOptions options, Trace* trace)
    : options_(std::move(options)), trace_(trace), loaded_(&model) {
    check_options(options_, model.config());
    t0_ = clock_us();
}

std::unique_ptr<LoadedModel> Engine::load_checked(const Weights& weights, const EngineOptions& o) {
    check_options(o, weights.config);  // before loading: a bad option costs no upload
    return std::make_unique<LoadedModel>(weights, o.backend, o.kernels);
}

void Engine::check_options(const EngineOptions& o, const ModelConfig& c) {
    const int max_seq_len = c.max_seq_len;
    PLAB_CHECK(o.block_size >= 1 && o.block_size <= 4096,
               "KV block size " << o.block_size << " must be between 1 and 4096 positions");
    PLAB_CHECK(o.kv_blocks >= 0, "the KV pool needs at least one block, got "
                                     << o.kv_blocks
                                     << " (0 picks a pool for 4 full-length sequences)");
    scheduler_options_of(o).validate();  // at once, though the scheduler comes with the pool
    PLAB_CHECK(policy_row(o.policy).chunks_prompts || o.max_step_tokens >= max_seq_len,
               "policy " << policy_name(o.policy)
                         << " prefills whole prompts, so its token budget must hold the longest, "
                            "max_seq_len "
                         << max_seq_len << "; got " << o.max_step_tokens
                         << " (or use policy chunked)");
    if (o.speculative.k > 0) check_speculative(o.speculative, c.vocab_size);
}

Engine::~Engine() {
    // Blocks go back before the pool itself goes (the pool's arrays are the backend's).
    if (cache_) {
        for (auto& r : requests_) cache_->blocks().release(r->seq);
    }
    ws_.reset();
    cache_.reset();
}

SchedulerOptions Engine::scheduler_options_of(const EngineOptions& o) {
    SchedulerOptions so;
    so.policy = o.policy;
    so.max_step_tokens = o.max_step_tokens;
    so.max_running = o.max_running;
    so.prefix_cache = o.prefix_cache;
    return so;
}

SchedulerOptions Engine::scheduler_options() const {
    SchedulerOptions so = scheduler_options_of(options_);
    so.salt = model_salt();
    return so;
}

double Engine::now_us() const {
    return virtual_ ? virtual_now_ : clock_us() - t0_;
}

void Engine::use_virtual_clock(StepDuration duration) {
    // Starts at 0 whatever the wall clock says, so a replay is the same to the byte.
    PLAB_CHECK(requests_.empty(), "switch to the virtual clock before the first request");
    virtual_now_ = 0;
    virtual_ = true;
    PLAB_ASSERT(duration != nullptr);
    duration_ = std::move(duration);
}

void Engine::advance_clock_to(double us) {
    PLAB_CHECK(virtual_, "advance_clock_to needs the virtual clock");
    virtual_now_ = std::max(virtual_now_, us);
}

KvCache& Engine::ensure_pool() {
    if (!cache_) {
        const ModelConfig& c = model().config();
        const int per_seq = (c.max_seq_len + options_.block_size - 1) / options_.block_size;
        const int blocks = options_.kv_blocks > 0 ? options_.kv_blocks : 4 * per_seq;
        cache_ = std::make_unique<KvCache>(backend(), c, options_.block_size, blocks);
        scheduler_ =
            std::make_unique<Scheduler>(cache_->blocks(), cache_->prefix(), scheduler_options());
        // The activations of the largest step, allocated before any step is timed.
        ws_ = std::make_unique<Workspace>(backend());
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
    if (cache_) {
        s.hit_blocks = scheduler_->hit_blocks();
        s.miss_blocks = scheduler_->miss_blocks();
        s.preemptions = scheduler_->preemptions();
        s.num_blocks = cache_->blocks().num_blocks();
        s.blocks_in_use = cache_->blocks().blocks_in_use();
        s.cached_free_blocks = cache_->blocks().cached_free_blocks();
        s.free_blocks = cache_->blocks().free_blocks();
        s.evictions = cache_->blocks().counters().evictions;
    }
    return s;
}

int Engine::add_request(std::vector<int32_t> prompt, RequestOptions options, double arrival_us) {
    const ModelConfig& c = model().config();
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
    KvCache& cache = ensure_pool();
    const int B = cache.blocks().block_size();
    const int blocks = (positions + B - 1) / B;
    PLAB_CHECK(blocks <= cache.blocks().num_blocks(),
               "request " << id << " needs " << blocks << " KV blocks of " << B << " positions ("
                          << n_prompt << " prompt + " << r->new_limit - 1
                          << " fed-back new tokens) but the whole pool has "
                          << cache.blocks().num_blocks() << "; give --kv-blocks " << blocks
                          << " or more");
    r->options = std::move(options);
    r->prompt = std::move(prompt);
    r->tokens = r->prompt;
    r->seq.id = id;
    r->speculation.rng = speculative_stream(r->options.sampler);
    r->speculation.stats.k = options_.speculative.k;
    r->speculation.stats.draft = options_.speculative.draft.text;
    r->arrival_us = arrival_us >= 0 ? std::min(arrival_us, now_us()) : now_us();
    scheduler_->add(*r);
    requests_.push_back(std::move(r));
    return id;
}

int Engine::add_prefilled(std::vector<int32_t> prompt, int32_t first_token,
                          std::vector<std::vector<float>> kv, RequestOptions options,
                          double arrival_us, double first_token_us) {
    const ModelConfig& c = model().config();
    PLAB_CHECK(kv.size() == 2 * static_cast<std::size_t>(c.n_layers),
               "handed-over K/V has " << kv.size() << " arrays; this model needs " << 2 * c.n_layers
                                      << " (K and V per layer)");
    const std::size_t row = std::size_t(c.n_kv_heads) * c.head_dim;
    for (const auto& part : kv) {
        PLAB_CHECK(part.size() == prompt.size() * row,
                   "handed-over K/V covers " << part.size() / row << " positions; the prompt has "
                                             << prompt.size());
    }
    PLAB_CHECK(first_token >= 0 && first_token < c.vocab_size,
               "handed-over first token " << first_token << " is out of range");
    PLAB_CHECK(options.max_new_tokens >= 2,
               "a handed-over request has made its first token; it needs max_new_tokens >= 2 "
               "to have any left to decode");
    const int id = add_request(std::move(prompt), std::move(options), arrival_us);
    Request& r = *requests_.back();
    r.tokens.push_back(first_token);
    r.token_us.push_back(first_token_us);
    r.kv = std::move(kv);
    r.kv_positions = static_cast<int>(r.prompt.size());
    return id;
}

std::vector<std::vector<float>> Engine::take_handed_over_kv(int id) {
    Request& r = *requests_.at(static_cast<std::size_t>(id));
    PLAB_CHECK(r.state == RequestState::finished && r.options.hand_over_kv,
               "request " << id
                          << " has no K/V to hand over (it needs hand_over_kv and to have "
                             "finished)");
    return std::move(r.kv);
}

// A step reads as the lifecycle of its tokens: intake (the scheduler picks the
// spans, handed-over K/V land, the clocks start), run (one forward over every
// span), sample (each finished prompt or decode token picks its next token),
// finish (a done request leaves, its K/V kept if asked), and the step's record.
const StepRecord& Engine::step() {
    PLAB_CHECK(has_unfinished(), "step() with no unfinished request");
    StepRecord rec;
    rec.index = static_cast<int>(steps_.size());
    rec.start_us = now_us();
    const double trace_t0 = trace_ ? trace_->now_us() : 0;

    // 1. Intake: the scheduler picks the spans and reserves their positions.
    double predictor_us = 0;
    const Schedule schedule = take_in(rec, predictor_us);
    // 2. Run: one forward step over every scheduled sequence.
    const std::vector<StepItem> items = step_items(schedule, rec);
    const bool on_device = samples_on_device(schedule);
    ForwardProbes probes;
    probes.logits_stay_on_device = on_device;
    const StepOutput out = forward_step(model(), *cache_, items, *ws_, probes, trace_);
    // 3. Sample, and 4. finish the requests that are done.
    sample_and_finish(schedule, items, out, on_device, rec);
    // 5. The step's record: its measured time, the pool after it.
    close_step(rec, predictor_us, trace_t0);
    steps_.push_back(std::move(rec));
    return steps_.back();
}

Schedule Engine::take_in(StepRecord& rec, double& predictor_us) {
    KvCache& cache = ensure_pool();
    if (options_.speculative.k > 0) propose_guesses();
    Schedule schedule = scheduler_->schedule();
    schedule.idle_before_us = rec.start_us - last_step_end_us_;
    // K/V handed over from a prefill engine go into their reserved slots now,
    // before the step reads them (the scheduler decided; the engine writes).
    for (Request* r : schedule.handed_over) {
        for (std::size_t i = 0; i < r->kv.size(); ++i) {
            cache.storage().write(r->seq, static_cast<int>(i / 2),
                                  i % 2 == 0 ? KvPart::K : KvPart::V, r->kv[i]);
        }
        r->kv.clear();  // a later preemption recomputes from the tokens, as for any request
    }
    for (const ScheduledSpan& span : schedule.spans) {
        Request& r = *span.request;
        if (r.first_scheduled_us < 0) r.first_scheduled_us = rec.start_us;
    }
    // The virtual clock jumps to the step's end now, so its tokens carry it.
    if (virtual_) {
        rec.predicted_us = duration_(model().config(), schedule);
        virtual_now_ += rec.predicted_us;
    } else if (predictor_) {
        // The prediction is the lab's instrument, not the engine's work: its
        // own microseconds are taken out of the measured step (close_step).
        const double t = now_us();
        rec.predicted_us = predictor_(model().config(), schedule);
        predictor_us = now_us() - t;
    }
    rec.preempted = schedule.preempted;
    rec.prefill_tokens = schedule.prefill_tokens;
    rec.decode_tokens = schedule.decode_tokens;
    if (trace_ != nullptr) {
        for (int id : schedule.preempted) {
            trace_->instant("preempt", "engine",
                            {{"request", std::to_string(id)},
                             {"tokens", std::to_string(request(id).tokens.size())},
                             {"blocks_in_use", std::to_string(cache.blocks().blocks_in_use())}});
        }
    }
    PLAB_CHECK(!schedule.spans.empty(),
               "the engine could schedule nothing: a request needs more blocks than the pool "
               "can free");
    return schedule;
}

std::vector<StepItem> Engine::step_items(const Schedule& schedule, StepRecord& rec) const {
    std::vector<StepItem> items;
    items.reserve(schedule.spans.size());
    for (const ScheduledSpan& span : schedule.spans) {
        Request& r = *span.request;
        const int first = r.seq.length - span.n_tokens;
        // Only a span that ends the known tokens (a decode token, the
        // prompt's last chunk, a verify span's every row) samples, so only
        // those rows need the classifier (sampled_rows).
        const bool wants_logits = sampled_rows(span) > 0;
        // A verify span's tokens are the fed token and the guesses, kept
        // beside r.tokens (runtime/request.h RequestSpeculation).
        const std::span<const int32_t> tokens =
            span.guesses > 0 ? std::span<const int32_t>(r.speculation.chunk)
                             : std::span<const int32_t>(r.tokens).subspan(
                                   std::size_t(first), std::size_t(span.n_tokens));
        items.push_back(
            {&r.seq, tokens, r.options.mask.view(), span.slots, wants_logits, span.guesses > 0});
        rec.requests.push_back(r.id);
        rec.tokens.push_back(span.n_tokens);
        rec.decode.push_back(span.decode);
        rec.guesses.push_back(span.guesses);
        rec.accepted.push_back(0);  // set once the rule has run (accept_verified)
    }
    return items;
}

// Greedy sampling on the device: when every request of the step samples
// greedily and keeps no logits, each one's token is the backend's argmax
// of its logits row, and no logits cross back to the host (on a GPU: 4
// bytes per request instead of V floats). Same rule as the host's argmax
// (the lowest index among equal maxima), so the same tokens.
bool Engine::samples_on_device(const Schedule& schedule) const {
    // Speculation's rule reads whole distributions (a row per guess).
    bool on_device = options_.speculative.k == 0;
    for (const ScheduledSpan& span : schedule.spans) {
        const Request& r = *span.request;
        on_device = on_device && r.options.sampler.temperature == 0.0f && !r.options.keep_logits;
    }
    return on_device;
}

// A request whose known tokens are all computed samples its next one from its
// last position's logits; it is done at EOS or at its limit.
void Engine::sample_and_finish(const Schedule& schedule, const std::vector<StepItem>& items,
                               const StepOutput& out, bool on_device, StepRecord& rec) {
    KvCache& cache = *cache_;
    const std::size_t V = static_cast<std::size_t>(model().config().vocab_size);
    // On the device: every row's greedy token in one call (a batched step's
    // rows side by side); a row whose prompt is not done yet is not used.
    std::size_t logit_rows = 0;
    for (const ScheduledSpan& span : schedule.spans) logit_rows += sampled_rows(span);
    std::vector<int32_t> greedy(on_device ? logit_rows : 0);
    if (on_device && logit_rows > 0)
        backend().argmax_rows(ws_->logits.buf(), static_cast<int>(greedy.size()), V, greedy);
    std::size_t row_index = 0;  // the logits row of the next item that wants one
    // Blocks the request's mask lets no later query see go back to the pool.
    auto forget = [&cache](Request& r) {
        if (!r.options.mask.is_causal())
            cache.blocks().free_forgotten(r.seq, r.options.mask.view());
    };
    for (std::size_t i = 0; i < schedule.spans.size(); ++i) {
        const ScheduledSpan& span = schedule.spans[i];
        Request& r = *span.request;
        if (speculates(span)) {
            // A verify step (engine_speculation.cpp), rolled back before the
            // mask forgets: forgetting reads where the next query stands.
            const std::size_t n_rows = static_cast<std::size_t>(sampled_rows(span));
            const std::span<const float> rows(out.logits.data() + row_index * V, n_rows * V);
            row_index += n_rows;
            rec.accepted[i] = accept_verified(r, rows, span.guesses);
            if (r.state == RequestState::finished)
                rec.finished.push_back(r.id);
            else
                forget(r);
            continue;
        }
        forget(r);
        if (!items[i].wants_logits) continue;  // prompt not done
        const std::size_t row_i = row_index++;
        int32_t token = 0;
        if (on_device) {
            token = greedy[row_i];
        } else {
            const auto row = out.logits.begin() + static_cast<std::ptrdiff_t>(row_i * V);
            const std::vector<float> logits(row, row + static_cast<std::ptrdiff_t>(V));
            token = r.sampler.sample(logits);
            if (r.options.keep_logits) r.logits.push_back(logits);
        }
        r.tokens.push_back(token);
        r.token_us.push_back(now_us());
        const int made = static_cast<int>(r.tokens.size() - r.prompt.size());
        const bool eos = r.options.eos_id >= 0 && token == r.options.eos_id;
        if (eos || made >= r.new_limit) {
            finish(r, eos ? "eos" : "length");
            rec.finished.push_back(r.id);
        }
    }
}

void Engine::finish(Request& r, const char* reason) {
    r.finish_reason = reason;
    if (r.options.hand_over_kv) {
        // Positions 0..length-1: the prompt (the new token is not fed back here).
        r.kv_positions = r.seq.length;
        for (int l = 0; l < model().config().n_layers; ++l) {
            r.kv.push_back(cache_->storage().read(r.seq, l, KvPart::K));
            r.kv.push_back(cache_->storage().read(r.seq, l, KvPart::V));
        }
    }
    scheduler_->finish(r);
    r.speculation.drafter.reset();  // a draft model's KV cache goes with the request
    r.finish_us = now_us();
}

void Engine::close_step(StepRecord& rec, double predictor_us, double trace_t0) {
    backend().synchronize();
    last_step_end_us_ = now_us();
    rec.us = last_step_end_us_ - rec.start_us - predictor_us;
    rec.blocks_in_use = cache_->blocks().blocks_in_use();
    rec.cached_free_blocks = cache_->blocks().cached_free_blocks();
    if (trace_ != nullptr) {
        trace_->span("step", "engine", trace_t0,
                     {{"step", std::to_string(rec.index)},
                      {"sequences", std::to_string(rec.requests.size())},
                      {"prefill_tokens", std::to_string(rec.prefill_tokens)},
                      {"decode_tokens", std::to_string(rec.decode_tokens)},
                      {"blocks_in_use", std::to_string(rec.blocks_in_use)}});
    }
}

void Engine::run() {
    while (has_unfinished()) step();
}

}  // namespace plab
