#include "runtime/generate.h"

#include <memory>
#include <string>

#include "core/error.h"

namespace plab {

GenerateResult generate(const DeviceModel& model, const Tokenizer& tokenizer,
                        const std::string& prompt, const std::vector<int32_t>& prompt_tokens,
                        const GenerateOptions& options, Trace& trace) {
    PLAB_CHECK(options.max_new_tokens >= 1,
               "max new tokens " << options.max_new_tokens << " must be at least 1");
    options.sampler.validate();
    GenerateResult r;
    // 1. The request is handed to the engine: TTFT's clock starts here (no
    //    client or network before it). One request on an idle engine, so its
    //    queue wait is ~0; the span is recorded so the trace has every stage.
    const double t_request = trace.now_us();
    trace.span("queue", "request", t_request);

    // 2. Tokenize: part of TTFT, not of prefill.
    double t = trace.now_us();
    r.prompt_tokens = prompt_tokens.empty() ? tokenizer.encode(prompt, true) : prompt_tokens;
    trace.span("tokenize", "request", t, {{"tokens", std::to_string(r.prompt_tokens.size())}});

    // 3. Allocate the KV cache: the session's block pool (on a GPU, device
    //    memory). No prompt data moves here: the token ids go to the device
    //    inside the first prefill chunk's embedding lookup, and each chunk's
    //    logits come back in its "copy logits to host" span.
    t = trace.now_us();
    Session session(model, options.session, &trace);
    trace.span("allocate KV cache", "request", t);
    PLAB_CHECK(!r.prompt_tokens.empty(), "empty prompt: nothing to prefill");
    const ChunkPlan plan =
        parse_chunk_plan(options.chunks, static_cast<int>(r.prompt_tokens.size()));

    // 4. Prefill, chunk by chunk.
    PrefillResult pre = session.prefill(r.prompt_tokens, plan);
    r.prefill_us = pre.prefill_us;

    // 5. The first token comes from the last position's distribution.
    Sampler sampler(options.sampler);
    t = trace.now_us();
    int32_t token = sampler.sample(pre.last_logits);
    trace.span("sample", "sample", t, {{"token", std::to_string(token)}});
    t = trace.now_us();
    r.new_tokens.push_back(token);
    trace.span("deliver", "request", t, {{"text", tokenizer.token_text(token)}});
    r.ttft_us = trace.now_us() - t_request;
    trace.add({"time to first token", "request", t_request, r.ttft_us, {}});

    // 6. Decode: one token per step, each reusing the cached K/V of all before
    //    it — or, without a KV cache, recomputing every position before it.
    const int room = model.config().max_seq_len - static_cast<int>(r.prompt_tokens.size());
    const int steps = std::min(options.max_new_tokens, room);
    if (options.speculative.k > 0) {
        // 6'. Or speculatively: up to k guesses per target forward (a verify
        //     step is a chunk of k + 1 positions; runtime/speculative.h).
        PLAB_CHECK(options.kv_cache,
                   "--speculate needs the KV cache: a verify step is a chunk "
                   "on top of it, and rejected guesses are rolled back from it");
        std::unique_ptr<Drafter> drafter =
            make_drafter(options.speculative, model.config().vocab_size, options.session.block_size,
                         options.sampler);
        std::vector<int32_t> context = r.prompt_tokens;
        context.push_back(token);
        r.speculative.k = options.speculative.k;
        r.speculative.draft = options.speculative.draft.text;
        speculative_decode(session, *drafter, options.sampler, options.speculative.k, steps,
                           options.stop_at_eos ? tokenizer.eos_id() : -1, context, r.new_tokens,
                           r.speculative, trace, r.decode_step_us);
        for (int n : r.speculative.proposed_per_step) r.decode_step_positions.push_back(n + 1);
        token = r.new_tokens.back();
    }
    const bool speculated = options.speculative.k > 0;
    std::vector<int32_t> sequence = r.prompt_tokens;  // what a cache-free step recomputes
    while (!speculated && static_cast<int>(r.new_tokens.size()) < steps) {
        if (options.stop_at_eos && token == tokenizer.eos_id()) break;
        t = trace.now_us();
        std::vector<float> logits;
        int position = 0;  // the fed-back token's
        if (options.kv_cache) {
            logits = session.decode_step(token);
            position = session.length() - 1;
            r.decode_step_positions.push_back(1);
        } else {
            sequence.push_back(token);
            Session fresh(model, options.session, nullptr);
            logits =
                fresh.prefill(sequence, parse_chunk_plan("full", static_cast<int>(sequence.size())))
                    .last_logits;
            position = static_cast<int>(sequence.size()) - 1;
            r.decode_step_positions.push_back(static_cast<int>(sequence.size()));
        }
        token = sampler.sample(logits);
        r.new_tokens.push_back(token);
        trace.span("decode step", "decode", t,
                   {{"position", std::to_string(position)},
                    {"positions_computed", std::to_string(r.decode_step_positions.back())},
                    {"token", std::to_string(token)}});
        r.decode_step_us.push_back(trace.now_us() - t);
    }
    const int made = static_cast<int>(r.new_tokens.size());
    r.stopped_at_context_end = made < options.max_new_tokens && made >= steps &&
                               !(options.stop_at_eos && token == tokenizer.eos_id());
    r.text = tokenizer.decode(r.new_tokens);
    trace.span("request", "request", t_request);
    return r;
}

}  // namespace plab
