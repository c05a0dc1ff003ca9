#include "runtime/session.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"

namespace plab {
namespace {

int blocks_for(const ModelConfig& c, const SessionOptions& o) {
    PLAB_CHECK(o.block_size >= 1 && o.block_size <= 4096,
               "KV block size " << o.block_size << " must be between 1 and 4096 positions");
    return o.num_blocks > 0 ? o.num_blocks : (c.max_seq_len + o.block_size - 1) / o.block_size;
}

}  // namespace

Session::Session(const LoadedModel& model, SessionOptions options, Trace* trace)
    : Session(model.device(), std::move(options), trace) {}

Session::Session(const DeviceModel& model, SessionOptions options, Trace* trace)
    : model_(model),
      trace_(trace),
      mask_(options.mask),
      cache_(model.backend(), model.config(), options.block_size,
             blocks_for(model.config(), options)),
      ws_(model.backend()) {}

Session::~Session() {
    cache_.blocks().release(seq_);
}

void Session::check_tokens(std::span<const int32_t> tokens) const {
    const ModelConfig& c = model_.config();
    PLAB_CHECK(!tokens.empty(), "empty prompt: prefill needs at least one token");
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        PLAB_CHECK(tokens[i] >= 0 && tokens[i] < c.vocab_size,
                   "token id " << tokens[i] << " at position " << i
                               << " is out of range; valid ids are 0.." << c.vocab_size - 1);
    }
    PLAB_CHECK(seq_.length + static_cast<int>(tokens.size()) <= c.max_seq_len,
               "prompt of " << tokens.size() << " tokens (after " << seq_.length
                            << " cached) exceeds max_seq_len " << c.max_seq_len
                            << "; shorten the prompt");
}

// A custom mask covers the positions of its file only; a query past it has no row.
void Session::check_mask_limit(int n_new) const {
    const int limit = mask_.limit();
    PLAB_CHECK(limit == 0 || seq_.length + n_new <= limit,
               "mask '" << mask_.spec() << "' covers positions 0.." << limit - 1 << " but position "
                        << std::max(seq_.length, limit)
                        << " would need a row of it; give a mask file with a row for every "
                           "position (prompt and new tokens)");
}

namespace {

// A chunk's probes in the prefill-wide results: its attention maps cover keys
// 0..pos0+len-1 (placed in the (T, keys) maps), its attention rows follow the
// previous chunks'.
void place_chunk_probes(const StepOutput& out, int pos0, int start_pos, int len, PrefillResult& r) {
    for (std::size_t i = 0; i < r.attention.size(); ++i) {
        AttentionMap& m = r.attention[i];
        const int keys = pos0 + len;
        for (int qi = 0; qi < len; ++qi) {
            std::copy_n(out.attention_probs[i].begin() + std::size_t(qi) * keys, keys,
                        m.probs.begin() + std::size_t(pos0 - start_pos + qi) * m.n_keys);
            if (!m.scores.empty())
                std::copy_n(out.attention_scores[i].begin() + std::size_t(qi) * keys, keys,
                            m.scores.begin() + std::size_t(pos0 - start_pos + qi) * m.n_keys);
        }
    }
    for (std::size_t i = 0; i < r.attention_rows.size(); ++i) {
        AttentionRows& rows = r.attention_rows[i];
        rows.q.insert(rows.q.end(), out.attention_q[i].begin(), out.attention_q[i].end());
        rows.out.insert(rows.out.end(), out.attention_out[i].begin(), out.attention_out[i].end());
        rows.k.insert(rows.k.end(), out.attention_k[i].begin(), out.attention_k[i].end());
        rows.v.insert(rows.v.end(), out.attention_v[i].begin(), out.attention_v[i].end());
    }
}

}  // namespace

PrefillResult Session::prefill(std::span<const int32_t> tokens, const ChunkPlan& plan,
                               const ForwardProbes& probes) {
    check_tokens(tokens);
    PLAB_CHECK(plan.n_tokens() == static_cast<int>(tokens.size()),
               "chunk plan " << plan.to_string() << " covers " << plan.n_tokens()
                             << " tokens but the prompt has " << tokens.size());
    for (int len : plan.lengths) PLAB_CHECK(len >= 1, "chunk lengths must be at least 1");
    check_mask_limit(static_cast<int>(tokens.size()));
    const Mask mask = mask_.view();
    check_plan_for_mask(mask, plan, seq_.length);

    PrefillResult r;
    r.plan = plan;
    const int n_total = static_cast<int>(tokens.size());
    const int start_pos = seq_.length;
    const int V = model_.config().vocab_size;
    for (const AttentionProbe& p : probes.attention) {
        AttentionMap m;
        m.probe = p;
        m.query_pos0 = start_pos;
        m.n_queries = n_total;
        m.n_keys = start_pos + n_total;
        m.probs.assign(std::size_t(m.n_queries) * m.n_keys, 0.0f);
        if (probes.attention_scores)
            m.scores.assign(std::size_t(m.n_queries) * m.n_keys, -INFINITY);
        r.attention.push_back(std::move(m));
    }
    for (int layer : probes.attention_rows) r.attention_rows.push_back({layer, {}, {}, {}, {}});
    if (probes.all_logits) r.all_logits.reserve(std::size_t(n_total) * V);

    // The workspace is allocated before the clock starts, as an engine does at
    // start-up: a prefill's time is its kernels and copies, not cudaMalloc.
    const int longest = *std::max_element(plan.lengths.begin(), plan.lengths.end());
    ws_.ensure(model_.config(), longest);
    ws_.ensure_logits(probes.all_logits ? longest : 1, V);
    // With Trace::device_ops, a GPU backend times every op on the device too.
    Backend& backend = model_.backend();
    const bool device_ops =
        trace_ && trace_->enabled && trace_->device_ops && backend.times_device_ops();
    if (device_ops) {
        backend.take_device_op_times();  // drop ops timed before this prefill
        backend.set_device_op_timing(true);
    }

    const auto wall0 = std::chrono::steady_clock::now();
    const double t0 = trace_ ? trace_->now_us() : 0;
    int offset = 0;
    for (std::size_t c = 0; c < plan.lengths.size(); ++c) {
        const int len = plan.lengths[c];
        const double tc = trace_ ? trace_->now_us() : 0;
        const int pos0 = seq_.length;
        // Only the last chunk's last position gives the first new token: the
        // chunks before it stop after the layers (no classifier) unless a
        // probe asks for every position's logits.
        ForwardProbes chunk_probes = probes;
        chunk_probes.skip_logits = !probes.all_logits && c + 1 < plan.lengths.size();
        StepOutput out = forward_chunk(model_, cache_, seq_, tokens.subspan(offset, len), ws_,
                                       chunk_probes, trace_, mask);
        forget_blocks(mask);
        if (trace_) {
            trace_->span("prefill chunk", "prefill", tc,
                         {{"chunk", std::to_string(c)},
                          {"offset", std::to_string(pos0)},
                          {"length", std::to_string(len)}});
        }
        place_chunk_probes(out, pos0, start_pos, len, r);
        if (probes.all_logits) {
            r.all_logits.insert(r.all_logits.end(), out.logits.begin(), out.logits.end());
        }
        if (c + 1 == plan.lengths.size()) {
            r.last_logits.assign(out.logits.end() - V, out.logits.end());
        }
        offset += len;
    }
    backend.synchronize();
    r.prefill_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - wall0).count();
    if (trace_) {
        trace_->span("prefill", "prefill", t0,
                     {{"tokens", std::to_string(n_total)}, {"plan", plan.to_string()}});
    }
    if (device_ops) {
        // The device's own clock, placed on the trace's "device" track from the
        // prefill's start: the first op started on the device at or after t0.
        backend.set_device_op_timing(false);
        for (const DeviceOpTime& op : backend.take_device_op_times()) {
            trace_->add({op.op,
                         "device",
                         t0 + op.start_ms * 1e3,
                         op.ms * 1e3,
                         {{"clock", "device (CUDA events)"}}});
        }
    }
    return r;
}

std::vector<float> Session::decode_step(int32_t token) {
    const int32_t one[1] = {token};
    check_tokens(one);
    check_mask_limit(1);
    const Mask mask = mask_.view();
    StepOutput out = forward_chunk(model_, cache_, seq_, one, ws_, {}, trace_, mask);
    forget_blocks(mask);
    return std::move(out.logits);
}

std::vector<float> Session::verify(std::span<const int32_t> tokens) {
    check_tokens(tokens);
    check_mask_limit(static_cast<int>(tokens.size()));
    ForwardProbes probes;
    probes.all_logits = true;  // row i: the distribution after tokens[i]
    StepOutput out = forward_chunk(model_, cache_, seq_, tokens, ws_, probes, trace_, mask_.view());
    return std::move(out.logits);
}

void Session::roll_back(int new_length) {
    PLAB_CHECK(new_length >= 0 && new_length <= seq_.length,
               "roll back to " << new_length << " positions: the sequence has " << seq_.length);
    const int before = cache_.blocks().blocks_in_use();
    cache_.blocks().truncate(seq_, new_length);
    if (trace_ != nullptr && before != cache_.blocks().blocks_in_use()) {
        trace_->instant("kv roll back", "kv",
                        {{"length", std::to_string(new_length)},
                         {"blocks_in_use_before", std::to_string(before)},
                         {"blocks_in_use", std::to_string(cache_.blocks().blocks_in_use())}});
    }
    forget_blocks(mask_.view());
}

// After a chunk or a decode step, every layer has appended its K/V: blocks the
// mask lets no later query see go back to the pool (a sliding window keeps
// about W/B blocks however long the sequence grows; causal keeps them all).
void Session::forget_blocks(const Mask& mask) {
    const int before = cache_.blocks().blocks_in_use();  // the most this chunk held
    const int freed = cache_.blocks().free_forgotten(seq_, mask);
    if (freed > 0 && trace_ != nullptr) {
        trace_->instant("kv free", "kv",
                        {{"blocks", std::to_string(freed)},
                         {"next_position", std::to_string(seq_.length)},
                         {"blocks_in_use_before", std::to_string(before)},
                         {"blocks_in_use", std::to_string(cache_.blocks().blocks_in_use())}});
    }
}

}  // namespace plab
