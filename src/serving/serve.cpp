#include "serving/serve.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/error.h"
#include "core/random.h"
#include "runtime/cost_model.h"
#include "serving/serve_report.h"
#include "serving/simulate.h"

namespace plab {
namespace {

// The token ids of one workload line: its text encoded, or random ids drawn
// from the seed and the line's index (so a line's prompt does not depend on
// the lines before it).
std::vector<int32_t> prompt_ids(const WorkloadRequest& w, std::size_t index, const Model& model,
                                std::uint64_t seed) {
    if (w.prompt_tokens == 0) return model.tokenizer->encode(w.prompt, true);
    return synthetic_prompt(w, index, model.weights.config.vocab_size, seed);
}

// Median wall time of the steps of `e` that `keep` selects.
template <class Keep>
double median_step_us(const Engine& e, Keep keep) {
    std::vector<double> us;
    for (const StepRecord& s : e.steps())
        if (keep(s)) us.push_back(s.us);
    PLAB_CHECK(!us.empty(), "calibration ran no step of the kind it measures");
    return percentile(us, 0.5);
}

}  // namespace

StepCost calibrate_step_cost(const Model& model, const EngineOptions& engine) {
    const ModelConfig& c = model.weights.config;
    const int ctx = std::min(16, c.max_seq_len / 2);
    const int new_tokens = std::min(24, c.max_seq_len - ctx);
    PLAB_CHECK(new_tokens >= 4, "calibration needs a max_seq_len of at least 24");
    random::Engine rng(1);
    auto random_prompt = [&](int n) {
        std::vector<int32_t> t(static_cast<std::size_t>(n));
        for (int32_t& x : t) x = int32_t(random::uniform_int(rng, 0, c.vocab_size - 1));
        return t;
    };
    EngineOptions eo = engine;
    eo.prefix_cache = false;
    eo.policy = Policy::chunked;
    eo.max_step_tokens = std::max(eo.max_step_tokens, 128);
    // Decode at batch b: b requests, timed once all of them decode.
    auto decode_us = [&](int b, double* flops) {
        Engine e(model.weights, eo);
        RequestOptions ro;
        ro.max_new_tokens = new_tokens;
        for (int i = 0; i < b; ++i) e.add_request(random_prompt(ctx), ro);
        e.run();
        // A decode step's arithmetic at the middle of the decode.
        *flops = b * prefill_cost(c, 1, ctx + new_tokens / 2).total();
        return median_step_us(
            e, [&](const StepRecord& s) { return s.decode_tokens == b && s.prefill_tokens == 0; });
    };
    double f1 = 0, f8 = 0;
    const double d1 = decode_us(1, &f1), d8 = decode_us(8, &f8);
    // Prefill: one request alone, its whole prompt in one step, five times.
    const int n = std::min(128, c.max_seq_len - 1);
    Engine e(model.weights, eo);
    RequestOptions ro;
    ro.max_new_tokens = 1;
    for (int i = 0; i < 5; ++i) {
        e.add_request(random_prompt(n), ro);
        e.run();
    }
    const double p = median_step_us(e, [&](const StepRecord& s) { return s.prefill_tokens == n; });
    const double fp = prefill_cost(c, n, 0).total();
    // d1 = a + b + f1/G, p = a + b + fp/G, d8 = a + 8b + f8/G.
    const double us_per_flop = (p - d1) / (fp - f1);
    StepCost cost;
    PLAB_CHECK(us_per_flop > 0, "calibration: a " << n << "-token prefill (" << p
                                                  << " us) was not slower than a decode step ("
                                                  << d1
                                                  << " us); the machine is too noisy, run "
                                                     "again");
    cost.gflops = 1.0 / (us_per_flop * 1e3);
    cost.per_sequence_us = std::max(0.0, (d8 - d1 - (f8 - f1) * us_per_flop) / 7);
    cost.step_us = d1 - cost.per_sequence_us - f1 * us_per_flop;
    PLAB_CHECK(cost.step_us >= 0, "calibration: the fixed cost per step came out negative ("
                                      << cost.step_us
                                      << " us); the machine is too noisy, run "
                                         "again");
    return cost;
}

namespace {

// The prompts of a workload, each checked against the model before anything runs.
std::vector<std::vector<int32_t>> workload_prompts(const Model& model, const Workload& workload,
                                                   std::uint64_t seed) {
    const ModelConfig& c = model.weights.config;
    std::vector<std::vector<int32_t>> prompts;
    for (std::size_t i = 0; i < workload.requests.size(); ++i) {
        const WorkloadRequest& w = workload.requests[i];
        prompts.push_back(prompt_ids(w, i, model, seed));
        const std::string at = w.line > 0 ? workload.source + " line " + std::to_string(w.line)
                                          : "request " + std::to_string(i);
        PLAB_CHECK(static_cast<int>(prompts.back().size()) <= c.max_seq_len,
                   at << ": a prompt of " << prompts.back().size()
                      << " tokens is longer than the model's max_seq_len " << c.max_seq_len);
    }
    return prompts;
}

void check_serve_options(const ServeOptions& o) {
    PLAB_CHECK(o.ttft_slo_ms > 0 && o.itl_slo_ms > 0, "the TTFT and ITL objectives must be > 0 ms");
    PLAB_CHECK(o.network_delay_ms >= 0, "the network delay must be >= 0 ms");
    PLAB_CHECK(o.link_gb_per_s >= 0, "the link bandwidth must be > 0 GB/s (0: measure it)");
}

// Colocated: one engine does both phases.
ServeReport serve_colocated(const Model& model, const Workload& workload, const ServeOptions& o,
                            const std::vector<std::vector<int32_t>>& prompts) {
    Engine engine(model.weights, o.engine);
    auto bounds = std::make_shared<std::vector<std::string>>();
    if (o.virtual_clock) {
        engine.use_virtual_clock(o.roofline ? o.roofline->clock(bounds) : o.cost.clock());
    } else if (o.roofline) {
        engine.use_step_predictor(o.roofline->clock(bounds));
    }
    const double t_start = engine.now_us();
    std::size_t next = 0;
    const std::size_t n = workload.requests.size();
    auto arrival_us = [&](std::size_t i) { return t_start + workload.requests[i].arrival_s * 1e6; };
    while (next < n || engine.has_unfinished()) {
        if (!engine.has_unfinished() && next < n && arrival_us(next) > engine.now_us()) {
            // Idle until the next arrival.
            if (o.virtual_clock) {
                engine.advance_clock_to(arrival_us(next));
            } else {
                // Sleep to 2 ms before the arrival, then poll: the OS wakes a
                // sleeper 50-200 us late, which would be charged as queueing.
                const double wake = arrival_us(next) - 2000;
                if (wake > engine.now_us())
                    std::this_thread::sleep_for(
                        std::chrono::microseconds(static_cast<long long>(wake - engine.now_us())));
                while (engine.now_us() < arrival_us(next)) {
                }
            }
        }
        while (next < n && arrival_us(next) <= engine.now_us()) {
            RequestOptions ro;
            ro.max_new_tokens = workload.requests[next].max_new_tokens;
            engine.add_request(prompts[next], ro, arrival_us(next));
            ++next;
        }
        if (engine.has_unfinished()) engine.step();
    }
    PLAB_ASSERT(t_start == 0 || !o.virtual_clock);
    std::vector<Timeline> lines;
    for (int id = 0; id < engine.num_requests(); ++id)
        lines.push_back({record_of(engine.request(id), t_start)});
    ServeReport rep = assemble_report(lines, o);
    rep.summary.steps = static_cast<int>(engine.steps().size());
    rep.summary.preemptions = engine.pool_stats().preemptions;
    rep.steps = engine.steps();
    for (StepRecord& st : rep.steps) st.start_us -= t_start;
    rep.step_bounds = *bounds;
    return rep;
}

// Disaggregated: a prefill engine and a decode engine, each its own device
// with its own virtual clock; a request's KV blocks cross the link between
// them. The engine whose clock is behind runs next, so events happen in the
// order of one shared timeline.
ServeReport serve_disaggregated(const Model& model, const Workload& workload, const ServeOptions& o,
                                const std::vector<std::vector<int32_t>>& prompts) {
    PLAB_CHECK(o.virtual_clock,
               "--disaggregate runs both engines on this one machine: only the "
               "virtual clock times them as two devices; use --clock virtual");
    PLAB_CHECK(o.link_gb_per_s > 0,
               "the KV link of disaggregated serving needs a bandwidth "
               "above 0 GB/s, got "
                   << o.link_gb_per_s);
    const double link = o.link_gb_per_s;
    Engine prefill(model.weights, o.engine), decode(model.weights, o.engine);
    // The steps reported are the prefill engine's, and so are the bounds.
    auto bounds = std::make_shared<std::vector<std::string>>();
    prefill.use_virtual_clock(o.roofline ? o.roofline->clock(bounds) : o.cost.clock());
    decode.use_virtual_clock(o.roofline ? o.roofline->clock() : o.cost.clock());
    const std::size_t n = workload.requests.size();
    auto arrival_us = [&](std::size_t i) { return workload.requests[i].arrival_s * 1e6; };
    struct Handover {
        double at_us;  // when the last byte reaches the decode engine
        int prefill_id;
    };
    std::vector<Handover> in_flight;  // in order of arrival time (stable)
    std::vector<int> decode_id_of(n, -1);
    std::vector<double> transfer_ms(n, 0);
    std::vector<long long> transfer_bytes(n, 0);
    long long blocks = 0;
    std::size_t next = 0, handed = 0;
    while (next < n || prefill.has_unfinished() || handed < in_flight.size() ||
           decode.has_unfinished()) {
        // Arrivals and handovers due by each engine's own clock.
        while (next < n && arrival_us(next) <= prefill.now_us()) {
            RequestOptions ro;
            ro.max_new_tokens = 1;  // the prefill engine makes the first token only
            ro.hand_over_kv = workload.requests[next].max_new_tokens > 1;
            prefill.add_request(prompts[next], ro, arrival_us(next));
            ++next;
        }
        while (handed < in_flight.size() && in_flight[handed].at_us <= decode.now_us()) {
            const int pid = in_flight[handed].prefill_id;
            const Request& r = prefill.request(pid);
            RequestOptions ro;
            ro.max_new_tokens = workload.requests[static_cast<std::size_t>(pid)].max_new_tokens;
            decode_id_of[static_cast<std::size_t>(pid)] =
                decode.add_prefilled(r.prompt, r.tokens.back(), prefill.take_handed_over_kv(pid),
                                     ro, in_flight[handed].at_us, r.token_us.front());
            ++handed;
        }
        const bool p_work = prefill.has_unfinished(), d_work = decode.has_unfinished();
        if (p_work && (!d_work || prefill.now_us() <= decode.now_us())) {
            const StepRecord& s = prefill.step();
            for (int id : s.finished) {
                const Request& r = prefill.request(id);
                if (!r.options.hand_over_kv) continue;
                const long long nb =
                    (r.kv_positions + o.engine.block_size - 1) / o.engine.block_size;
                // A block of one sequence: B positions of K and V in every layer —
                // of the model the clock is charged as (the preset shape in its
                // precision, with a roofline clock), not only of the small model
                // whose K/V really cross: the link is part of the clock.
                const double per_position =
                    o.roofline ? kv_bytes_per_token(o.roofline->shape, o.roofline->dtype)
                               : double(prefill.cache().storage().bytes_per_token());
                const long long bytes =
                    nb * o.engine.block_size * static_cast<long long>(per_position);
                blocks += nb;
                transfer_bytes[static_cast<std::size_t>(id)] = bytes;
                const double ms = static_cast<double>(bytes) / (link * 1e9) * 1e3;
                transfer_ms[static_cast<std::size_t>(id)] = ms;
                in_flight.push_back({r.token_us.front() + ms * 1e3, id});
            }
        } else if (d_work) {
            decode.step();
        } else {
            // Both idle: move each clock to its next event.
            if (next < n) prefill.advance_clock_to(arrival_us(next));
            if (handed < in_flight.size()) decode.advance_clock_to(in_flight[handed].at_us);
        }
    }
    std::vector<Timeline> lines;
    for (std::size_t i = 0; i < n; ++i) {
        Timeline t{record_of(prefill.request(static_cast<int>(i)))};
        if (decode_id_of[i] >= 0) {  // its tokens from the decode engine, the first included
            const RequestRecord d = record_of(decode.request(decode_id_of[i]));
            t.rec.token_us = d.token_us;
            t.rec.new_tokens = d.new_tokens;
            t.rec.speculation = d.speculation;
            t.rec.preemptions += d.preemptions;
            t.rec.computed_tokens += d.computed_tokens;
            t.kv_transfer_ms = transfer_ms[i];
            t.kv_transfer_bytes = transfer_bytes[i];
        }
        lines.push_back(std::move(t));
    }
    ServeReport rep = assemble_report(lines, o);
    rep.policy += " (disaggregated)";
    rep.summary.steps = static_cast<int>(prefill.steps().size() + decode.steps().size());
    rep.summary.preemptions = prefill.pool_stats().preemptions + decode.pool_stats().preemptions;
    rep.summary.kv_transfer_blocks = blocks;
    rep.summary.link_gb_per_s = link;
    rep.steps = prefill.steps();
    rep.step_bounds = *bounds;
    return rep;
}

}  // namespace

int policy_step_tokens(Policy p, int token_budget, int max_seq_len) {
    return policy_row(p).chunks_prompts ? token_budget : max_seq_len;
}

ServeReport serve(const Model& model, const Workload& workload, const ServeOptions& o) {
    check_serve_options(o);
    if (o.simulate) return simulate_serve(workload, o);  // lengths only: no model runs
    const std::vector<std::vector<int32_t>> prompts = workload_prompts(model, workload, o.seed);
    return o.disaggregate ? serve_disaggregated(model, workload, o, prompts)
                          : serve_colocated(model, workload, o, prompts);
}

Trace serve_trace(const ServeReport& report) {
    const double network_delay_ms = report.network_delay_ms;
    Trace t;
    for (const StepRecord& s : report.steps) {
        std::string who;
        for (std::size_t i = 0; i < s.requests.size(); ++i) {
            who += (who.empty() ? "" : ",") + std::to_string(s.requests[i]) + ":" +
                   std::to_string(s.tokens[i]) + (s.decode[i] ? "d" : "p");
        }
        t.add_on_track({"step",
                        "engine",
                        s.start_us,
                        s.us,
                        {{"step", std::to_string(s.index)},
                         {"requests (id:tokens, p prefill d decode)", who},
                         {"prefill_tokens", std::to_string(s.prefill_tokens)},
                         {"decode_tokens", std::to_string(s.decode_tokens)},
                         {"blocks_in_use", std::to_string(s.blocks_in_use)},
                         {"bound", s.index < static_cast<int>(report.step_bounds.size())
                                       ? report.step_bounds[static_cast<std::size_t>(s.index)]
                                       : std::string("(coefficients: no roofline)")}}},
                       "engine steps");
        for (std::size_t i = 0; i < s.requests.size(); ++i) {
            t.add_on_track(
                {s.decode[i] ? "decode" : "prefill chunk",
                 "request",
                 s.start_us,
                 s.us,
                 {{"tokens", std::to_string(s.tokens[i])}, {"step", std::to_string(s.index)}}},
                "request " + std::to_string(s.requests[i]));
        }
    }
    for (const ServedRequest& r : report.requests) {
        const std::string track = "request " + std::to_string(r.id);
        t.add_on_track({"queued",
                        "request",
                        r.arrival_s * 1e6,
                        (r.first_scheduled_s - r.arrival_s) * 1e6,
                        {{"prompt_tokens", std::to_string(r.prompt_tokens)}}},
                       track);
        if (!r.token_s.empty()) {
            t.add_on_track({"first token",
                            "request",
                            r.token_s.front() * 1e6,
                            0,
                            {{"ttft_ms", std::to_string(r.latency.ttft_ms)}}},
                           track);
            t.add_on_track({"finish",
                            "request",
                            r.token_s.back() * 1e6,
                            0,
                            {{"new_tokens", std::to_string(r.new_tokens.size())}}},
                           track);
        }
        // Delivery is a stage of its own that overlaps the
        // engine's next step (the engine samples the next token while this one
        // is still on the wire), so it gets a track of its own.
        if (network_delay_ms > 0) {
            for (std::size_t k = 0; k < r.token_s.size(); ++k) {
                t.add_on_track({k == 0 ? "first token delivered" : "token delivered",
                                "network",
                                r.token_s[k] * 1e6,
                                network_delay_ms * 1e3,
                                {{"token", std::to_string(k)},
                                 {"network_delay_ms", std::to_string(network_delay_ms)}}},
                               track + " delivery");
            }
        }
    }
    return t;
}

}  // namespace plab
