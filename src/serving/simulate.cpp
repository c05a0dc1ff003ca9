#include "serving/simulate.h"

#include <algorithm>
#include <memory>

#include "core/error.h"
#include "runtime/block_manager.h"
#include "runtime/prefix_cache.h"
#include "runtime/scheduler.h"
#include "serving/serve_report.h"

namespace plab {
namespace {

void check_simulate_options(const ServeOptions& o) {
    PLAB_CHECK(o.roofline != nullptr,
               "--simulate charges each step on the roofline clock: give --hardware CARD and "
               "--shape SHAPE (plab serve --list-hardware, --list-shapes)");
    PLAB_CHECK(o.virtual_clock,
               "--simulate runs no forward pass, so nothing can be timed on the "
               "real clock: use --clock virtual");
    PLAB_CHECK(!o.disaggregate,
               "--simulate replays one colocated engine; drop --disaggregate (it hands real K/V "
               "between two engines)");
    PLAB_CHECK(o.engine.speculative.k == 0,
               "--simulate makes placeholder tokens, which no draft can guess: drop --speculate");
    PLAB_CHECK(o.engine.block_size >= 1 && o.engine.block_size <= 4096,
               "KV block size " << o.engine.block_size << " must be between 1 and 4096 positions");
}

// A placeholder for a new token: an id no other request makes at that place,
// so the prefix cache never finds a false match in generated text.
int32_t placeholder(int request, int made, int vocab) {
    std::uint64_t x = (std::uint64_t(request) << 32) ^ std::uint64_t(made) ^ 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;  // splitmix64's mixer
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return int32_t((x ^ (x >> 31)) % std::uint64_t(vocab));
}

// The engine's step loop without the forward pass (runtime/engine.cpp's
// Engine::step and its virtual clock, job for job): the scheduler picks the
// spans, the clock is charged, each span that ends its known tokens samples a
// placeholder, a request at its limit finishes.
class Simulator {
public:
    Simulator(const ServeOptions& o, int kv_blocks)
        : o_(o),
          shape_(o.roofline->shape),
          pool_(o.engine.block_size, kv_blocks),
          prefix_(pool_),
          scheduler_(pool_, prefix_, scheduler_options(o)),
          clock_(o.roofline->clock(bounds_)) {}

    Request& add(std::vector<int32_t> prompt, int max_new_tokens, double arrival_us, int line_id,
                 const std::string& at);
    void step();
    bool has_unfinished() const { return scheduler_.has_unfinished(); }
    double now_us() const { return now_us_; }
    void idle_until(double us) { now_us_ = std::max(now_us_, us); }
    ServeReport report();

private:
    static SchedulerOptions scheduler_options(const ServeOptions& o) {
        SchedulerOptions so;
        so.policy = o.engine.policy;
        so.max_step_tokens = o.engine.max_step_tokens;
        so.max_running = o.engine.max_running;
        so.prefix_cache = o.engine.prefix_cache;
        so.salt = 0x51a1a7edULL;  // one model: any fixed name
        return so;
    }
    void finish(Request& r);

    const ServeOptions& o_;
    const ModelConfig& shape_;
    BlockManager pool_;
    PrefixCache prefix_;
    Scheduler scheduler_;
    std::shared_ptr<std::vector<std::string>> bounds_ =
        std::make_shared<std::vector<std::string>>();
    StepDuration clock_;
    std::vector<std::unique_ptr<Request>> requests_;
    std::vector<Timeline> lines_;
    std::vector<StepRecord> steps_;
    double now_us_ = 0, last_step_end_us_ = 0;
};

Request& Simulator::add(std::vector<int32_t> prompt, int max_new_tokens, double arrival_us,
                        int line_id, const std::string& at) {
    const int n = static_cast<int>(prompt.size());
    PLAB_CHECK(n <= shape_.max_seq_len, at << ": a prompt of " << n << " tokens is longer than "
                                           << o_.roofline->shape_name << "'s context of "
                                           << shape_.max_seq_len << " positions");
    auto r = std::make_unique<Request>(SamplerOptions{});
    r->id = line_id;
    r->options.max_new_tokens = max_new_tokens;
    r->new_limit = std::max(1, std::min(max_new_tokens, shape_.max_seq_len - n));
    const int positions = n + r->new_limit - 1;  // the last new token is never fed back
    const int blocks = (positions + pool_.block_size() - 1) / pool_.block_size();
    PLAB_CHECK(blocks <= pool_.num_blocks(),
               at << ": a request of " << positions << " positions needs " << blocks
                  << " KV blocks but the card's pool has " << pool_.num_blocks()
                  << "; give a larger --gpu-memory-utilization, a larger card or --kv-blocks");
    r->prompt = std::move(prompt);
    r->tokens = r->prompt;
    r->seq.id = line_id;
    r->arrival_us = arrival_us;
    scheduler_.add(*r);
    requests_.push_back(std::move(r));
    lines_.emplace_back();
    return *requests_.back();
}

void Simulator::step() {
    StepRecord rec;
    rec.index = static_cast<int>(steps_.size());
    rec.start_us = now_us_;
    Schedule s = scheduler_.schedule();
    s.idle_before_us = rec.start_us - last_step_end_us_;
    PLAB_CHECK(!s.spans.empty(),
               "the engine could schedule nothing: a request needs more blocks than the pool "
               "can free");
    for (const ScheduledSpan& span : s.spans) {
        Request& r = *span.request;
        if (r.first_scheduled_us < 0) r.first_scheduled_us = rec.start_us;
        rec.requests.push_back(r.id);
        rec.tokens.push_back(span.n_tokens);
        rec.decode.push_back(span.decode);
        rec.guesses.push_back(0);
        rec.accepted.push_back(0);
    }
    // The step's cost on the roofline clock; its tokens carry its end.
    rec.predicted_us = clock_(shape_, s);
    now_us_ += rec.predicted_us;
    rec.us = now_us_ - rec.start_us;  // as the engine measures it on its virtual clock
    rec.preempted = s.preempted;
    rec.prefill_tokens = s.prefill_tokens;
    rec.decode_tokens = s.decode_tokens;
    for (const ScheduledSpan& span : s.spans) {
        Request& r = *span.request;
        if (sampled_rows(span) == 0) continue;  // a prompt's earlier chunk
        const int made = static_cast<int>(r.tokens.size() - r.prompt.size());
        r.tokens.push_back(placeholder(r.id, made, shape_.vocab_size));
        r.token_us.push_back(now_us_);
        if (made + 1 >= r.new_limit) {
            finish(r);
            rec.finished.push_back(r.id);
        }
    }
    last_step_end_us_ = now_us_;
    rec.blocks_in_use = pool_.blocks_in_use();
    rec.cached_free_blocks = pool_.cached_free_blocks();
    steps_.push_back(std::move(rec));
}

// A finished request keeps its lengths and times; its ids go (the memory of
// the run is the requests in flight, not all that arrived).
void Simulator::finish(Request& r) {
    r.finish_reason = "length";
    scheduler_.finish(r);
    r.finish_us = now_us_;
    Timeline& t = lines_[static_cast<std::size_t>(r.id)];
    t.prompt_tokens = static_cast<int>(r.prompt.size());
    std::vector<int32_t>().swap(r.prompt);
    std::vector<int32_t>().swap(r.tokens);
    t.rec = record_of(r);
}

ServeReport Simulator::report() {
    ServeReport rep = assemble_report(lines_, o_);
    rep.compute = "simulated";
    rep.summary.steps = static_cast<int>(steps_.size());
    rep.summary.preemptions = scheduler_.preemptions();
    rep.steps = std::move(steps_);
    rep.step_bounds = *bounds_;
    return rep;
}

}  // namespace

ServeReport simulate_serve(const Workload& workload, const ServeOptions& o) {
    check_simulate_options(o);
    const ModelConfig& shape = o.roofline->shape;
    // Without --kv-blocks the caller sizes the pool from the card's memory; a
    // caller that gives none gets room for 4 sequences of the full context.
    const int per_seq = (shape.max_seq_len + o.engine.block_size - 1) / o.engine.block_size;
    Simulator sim(o, o.engine.kv_blocks > 0 ? o.engine.kv_blocks : 4 * per_seq);
    const std::size_t n = workload.requests.size();
    auto arrival_us = [&](std::size_t i) { return workload.requests[i].arrival_s * 1e6; };
    std::size_t next = 0;
    while (next < n || sim.has_unfinished()) {
        if (!sim.has_unfinished() && next < n && arrival_us(next) > sim.now_us())
            sim.idle_until(arrival_us(next));  // idle until the next arrival
        while (next < n && arrival_us(next) <= sim.now_us()) {
            const WorkloadRequest& w = workload.requests[next];
            const std::string at = w.line > 0 ? workload.source + " line " + std::to_string(w.line)
                                              : "request " + std::to_string(next);
            PLAB_CHECK(w.prompt_tokens > 0,
                       at << ": --simulate replays lengths, and a text prompt's length needs the "
                             "model's tokenizer; give \"prompt_tokens\" instead of \"prompt\"");
            sim.add(synthetic_prompt(w, next, shape.vocab_size, o.seed), w.max_new_tokens,
                    arrival_us(next), static_cast<int>(next), at);
            ++next;
        }
        if (sim.has_unfinished()) sim.step();
    }
    return sim.report();
}

}  // namespace plab
