// Controller: drives the engine for the viewer and checks what comes back.
// See controller.h. Lessons: every panel's lesson (toy, causal mask, KV cache,
// bitwise equivalence, TTFT is not prefill).
#include "app/controller.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/serving_replay.h"
#include "app/serving_scenario.h"
#include "checks/self_check.h"
#include "core/error.h"
#include "core/kv_layout.h"
#include "core/sha256.h"
#include "model/shapes.h"
#include "runtime/generate.h"
#include "runtime/registry.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "runtime/speculative.h"

namespace plab::viewer {

namespace {

void print_check(bool enabled, const std::string& line) {
    if (enabled) std::printf("%s\n", line.c_str());
    std::fflush(stdout);
}

// A plan whose chunks have uneven lengths 3,1,4,1,5,... (the last one cut to fit):
// chunk boundaries that fall in awkward places are where bugs hide.
ChunkPlan irregular_plan(int n_tokens) {
    static constexpr int kLengths[] = {3, 1, 4, 1, 5, 9, 2, 6};
    ChunkPlan plan;
    int total = 0;
    for (int i = 0; total < n_tokens; ++i) {
        const int len = std::min(kLengths[i % 8], n_tokens - total);
        plan.lengths.push_back(len);
        total += len;
    }
    return plan;
}

}  // namespace

const AttentionMap* MaskSnapshot::map(int layer, int head) const {
    for (const AttentionMap& m : maps)
        if (m.probe.layer == layer && m.probe.head == head) return &m;
    return nullptr;
}

const std::vector<float>* MaskSnapshot::scores_of(const AttentionMap& m) const {
    return m.scores.size() == m.probs.size() ? &m.scores : nullptr;
}

std::string read_prompt_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    PLAB_CHECK(in.good(),
               "cannot read prompt file '" << path << "' (does it exist and is it readable?)");
    std::ostringstream text;
    text << in.rdbuf();
    std::string s = text.str();
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    PLAB_CHECK(!s.empty(), "prompt file '" << path << "' is empty");
    return s;
}

// 1. Model and backends -------------------------------------------------------------
namespace {

std::optional<Controller::HeadHint> read_head_hint(const std::string& model_path) {
    std::filesystem::path dir(model_path);
    if (std::filesystem::is_regular_file(dir)) dir = dir.parent_path();
    std::ifstream in(dir / "viewer.json");
    if (!in.good()) return std::nullopt;
    try {
        const nlohmann::json j = nlohmann::json::parse(in);
        Controller::HeadHint h;
        h.layer = j.at("attention_layer").get<int>();
        h.head = j.at("attention_head").get<int>();
        h.why = j.value("why", std::string());
        return h;
    } catch (const std::exception& e) {
        PLAB_CHECK(false, (dir / "viewer.json").string()
                              << ": " << e.what()
                              << " (expected {\"attention_layer\": L, \"attention_head\": H})");
    }
    return std::nullopt;
}

}  // namespace

Controller::Controller(const std::string& model_path) {
    if (!model_path.empty()) {
        model_ = load_model(model_path);
        head_hint_ = read_head_hint(model_path);
        return;
    }
    const std::string path = default_model_path();
    if (std::filesystem::exists(std::filesystem::path(path) / "config.json") ||
        std::filesystem::is_regular_file(path)) {
        model_ = load_model(path);
        head_hint_ = read_head_hint(path);
        return;
    }
    // No trained model shipped yet: a small seeded random model still shows
    // every mechanism (masks, chunks, cache), only the attention looks like noise.
    ModelConfig c = named_shape("small");
    c.max_seq_len = 512;  // as long as the shipped model's context
    model_.weights = make_random_weights(c, 1234);
    model_.tokenizer = std::make_unique<ByteTokenizer>();
    model_.source = "random weights, seed 1234 (no model at " + path + ")";
    random_model_ = true;
}

Controller::Controller(Model model) : model_(std::move(model)) {
    PLAB_CHECK(model_.tokenizer != nullptr,
               "the viewer needs a model with a tokenizer (" << model_.source << ")");
}

void Controller::fill_model_info(Snapshot& snap) const {
    const ModelConfig& c = model_.weights.config;
    snap.model_summary = c.summary();
    snap.model_source = model_.source;
    snap.random_model = random_model_;
    snap.backend_names = backend_names();
    snap.n_layers = c.n_layers;
    snap.n_heads = c.n_heads;
}

const LoadedModel& Controller::loaded(const std::string& backend_name) {
    auto it = loaded_.find(backend_name);
    if (it != loaded_.end()) return *it->second;
    auto m = std::make_unique<LoadedModel>(model_.weights, backend_name);
    return *loaded_.emplace(backend_name, std::move(m)).first->second;
}

std::vector<int32_t> Controller::encode(const ViewerState& state) const {
    const Tokenizer& tok = *model_.tokenizer;
    std::vector<int32_t> tokens = tok.encode(state.prompt, /*add_bos=*/true);
    if (state.prompt_tokens > 0) {
        // Repeat the text until it is long enough, then keep the first N tokens.
        std::string text = state.prompt;
        while (static_cast<int>(tokens.size()) < state.prompt_tokens && !state.prompt.empty()) {
            text += " " + state.prompt;
            tokens = tok.encode(text, /*add_bos=*/true);
        }
        if (static_cast<int>(tokens.size()) > state.prompt_tokens)
            tokens.resize(state.prompt_tokens);
    }
    const int max_len = model_.weights.config.max_seq_len;
    PLAB_CHECK(
        static_cast<int>(tokens.size()) <= max_len,
        "the prompt is " << tokens.size() << " tokens; this model takes at most " << max_len);
    return tokens;
}

BoundMask Controller::mask_for(const ViewerState& state, const std::vector<int32_t>& tokens) const {
    MaskContext ctx;
    ctx.tokens = tokens;
    ctx.bos_id = model_.tokenizer->bos_id();
    ctx.n_heads = model_.weights.config.n_heads;
    return make_mask(state.mask, ctx);
}

ChunkPlan allowed_plan(const Mask& mask, const ChunkPlan& asked, std::string& refusal) {
    refusal.clear();
    try {
        check_plan_for_mask(mask, asked);
        return asked;
    } catch (const Error& e) {
        refusal = e.what();
        return nearest_valid_plan(mask, asked);
    }
}

void Controller::refresh(const ViewerState& state, Dirty& dirty, Snapshot& snap, bool print_checks,
                         bool& checks_failed) {
    // Asks the engine for one part if it is dirty, then checks and reports the answer.
    auto part = [&](bool& flag, auto& out, auto refresh_fn, auto check_fn) {
        if (!flag) return;
        flag = false;
        try {
            (this->*refresh_fn)(state, out);
            out.ready = true;
            const CheckResult r = check_fn(out);
            print_check(print_checks, r.line);
            if (!r.ok) checks_failed = true;
        } catch (const std::exception& e) {
            out.error = e.what();
            out.ready = false;
            print_check(print_checks, std::string("error: ") + e.what());
            checks_failed = true;
        }
    };
    part(dirty.toy, snap.toy, &Controller::refresh_toy, check_toy);
    part(dirty.mask, snap.mask, &Controller::refresh_mask, check_mask);
    part(dirty.kv, snap.kv, &Controller::refresh_kv, check_kv);
    part(dirty.serving, snap.serving, &Controller::refresh_serving, check_serving);
    part(dirty.equivalence, snap.equivalence, &Controller::refresh_equivalence, check_equivalence);
    part(dirty.timeline, snap.timeline, &Controller::refresh_timeline, check_timeline);
    part(dirty.replay, snap.replay, &Controller::refresh_replay, check_replay);
    part(dirty.flash, snap.flash, &Controller::refresh_flash, check_flash);
}

// 2. Toy ---------------------------------------------------------------------------
void Controller::refresh_toy(const ViewerState& state, ToySnapshot& out) {
    out = ToySnapshot{};
    out.input = state.toy;
    out.input.validate();
    Backend& backend = loaded(state.backend).backend();
    out.backend = backend.name();
    out.reference = backend.is_reference();
    const int t = out.input.n_tokens();
    out.full = run_toy(backend, out.input, parse_chunk_plan("full", t));
    out.chunked = run_toy(backend, out.input, parse_chunk_plan(state.toy_chunks, t));
    out.all_bitwise = true;
    for (int p = 0; p < t; ++p) {
        const bool same =
            std::memcmp(&out.full.outputs[p], &out.chunked.outputs[p], sizeof(float)) == 0;
        out.bitwise.push_back(same);
        out.all_bitwise = out.all_bitwise && same;
        out.exact.push_back(toy_exact_output(out.input, p));
    }
}

// 3. The mask and attention ---------------------------------------------------------------
void Controller::refresh_mask(const ViewerState& state, MaskSnapshot& out) {
    out = MaskSnapshot{};
    const LoadedModel& eng = loaded(state.backend);
    const ModelConfig& c = model_.weights.config;
    out.backend = eng.backend().name();
    out.tokens = encode(state);
    const int t = out.n_tokens();
    for (int32_t id : out.tokens) out.token_text.push_back(model_.tokenizer->token_text(id));
    out.mask = mask_for(state, out.tokens);
    const Mask mask = out.mask.view();
    out.asked_plan = parse_chunk_plan(state.chunks, t);
    out.plan = allowed_plan(mask, out.asked_plan, out.refusal);
    out.n_layers = c.n_layers;
    out.n_heads = c.n_heads;
    out.n_kv_heads = c.n_kv_heads;
    out.head_dim = c.head_dim;
    ForwardProbes probes;
    probes.attention_scores = true;  // for the hover tooltip
    for (int l = 0; l < c.n_layers; ++l)
        for (int h = 0; h < c.n_heads; ++h) probes.attention.push_back({l, h});
    SessionOptions options;
    options.mask = out.mask;
    Session session(eng.device(), options);
    PrefillResult result = session.prefill(out.tokens, out.plan, probes);
    out.maps = std::move(result.attention);
    for (const AttentionMap& m : out.maps)
        PLAB_ASSERT(m.query_pos0 == 0 && m.n_queries == t && m.n_keys == t &&
                    m.probs.size() == static_cast<size_t>(t) * t);
    out.prefill_us = result.prefill_us;
    out.first_token = model_.tokenizer->token_text(argmax(result.last_logits));
    out.first_token_id = argmax(result.last_logits);
    out.top = top_probs(result.last_logits, 5);  // what `plab prefill --json` lists as "top"

    // What a tiled kernel makes of this mask, and the work it saves against causal.
    const int tile = std::clamp(state.mask_tile, 1, t);
    out.tile = tile;
    out.tiles = tile_map(mask, t, tile);
    out.visible_pairs = count_visible_pairs(mask, t);
    out.causal_pairs = static_cast<long long>(t) * (t + 1) / 2;

    // Chunked == full under this mask, asked of cpu-ref (a reference backend,
    // whose promise is bitwise): every position's logits, chunked vs whole.
    const DeviceModel& ref = loaded("cpu-ref").device();
    ForwardProbes logits_only;
    logits_only.all_logits = true;
    Session chunked(ref, options), whole(ref, options);
    const std::vector<float> a = chunked.prefill(out.tokens, out.plan, logits_only).all_logits;
    const std::vector<float> b =
        whole.prefill(out.tokens, parse_chunk_plan("full", t), logits_only).all_logits;
    out.chunked_equals_full =
        a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// 4. KV cache growth: one engine call at a time, the block table after each --------------
namespace {

// What the KV panel shows of one engine call, read from the session after it.
struct KvRecorder {
    Session& session;
    const Trace& trace;
    KvSnapshot& out;

    KvStage record(bool decode, int first, int n, std::size_t events_before) const {
        KvStage s;
        s.decode = decode;
        s.first_pos = first;
        s.n_pos = n;
        s.length = session.length();
        s.block_table = session.sequence().block_table;
        // A freed entry (kFreedBlock: a window mask gave the block back) has no count.
        for (int32_t b : s.block_table)
            s.ref_counts.push_back(b == kFreedBlock ? 0 : session.cache().blocks().ref_count(b));
        s.freed_blocks = BlockManager::freed_blocks(session.sequence());
        s.blocks_in_use = session.cache().blocks().blocks_in_use();
        s.bytes_in_use = session.cache().bytes_in_use();
        s.peak_blocks = s.blocks_in_use;
        const std::vector<TraceEvent>& ev = trace.events();
        for (std::size_t i = events_before; i < ev.size(); ++i) {
            if (ev[i].name == "kv append") s.appends.push_back(ev[i]);
            const auto before_free = ev[i].args.find("blocks_in_use_before");
            if (ev[i].name == "kv free" && before_free != ev[i].args.end())
                s.peak_blocks = std::max(s.peak_blocks, std::stoi(before_free->second));
        }
        return s;
    }
};

// The KV panel's decode steps as verify steps (runtime/speculative.h): prompt
// lookup proposes, one chunk verifies, the rejected guesses roll back. Greedy,
// so the tokens are greedy decoding's — made again plainly to show it.
void kv_verify_steps(const ViewerState& state, int limit, const KvRecorder& rec,
                     const Tokenizer& tok, std::vector<int32_t>& context) {
    KvSnapshot& out = rec.out;
    Session& session = rec.session;
    out.speculate = state.speculate;
    out.draft = "ngram:" + std::to_string(state.draft_ngram);
    NgramDrafter drafter(state.draft_ngram);
    SamplerOptions greedy;
    std::mt19937_64 rng = speculative_stream(greedy);
    const std::size_t first_new = context.size() - 1;
    for (int i = 0; i < state.decode_steps && session.length() < limit; ++i) {
        out.token_text.push_back(tok.token_text(context.back()));
        const std::size_t before = rec.trace.events().size();
        const int k = std::min(state.speculate, limit - session.length() - 1);
        const VerifyStep v = speculative_step(session, drafter, greedy, k, -1, context, rng);
        KvStage s = rec.record(true, v.position, static_cast<int>(v.chunk.size()), before);
        s.verify = true;
        s.chunk = v.chunk;
        for (int32_t id : v.chunk) s.chunk_text.push_back(tok.token_text(id));
        s.accepted = v.outcome.accepted;
        s.emitted = v.outcome.tokens;
        s.target_text = tok.token_text(v.outcome.tokens.back());
        s.blocks_verified = v.blocks_verified;
        s.table_verified = v.block_table_verified;
        s.peak_blocks = std::max(s.peak_blocks, v.blocks_verified);
        // The accepted guesses' positions are in the cache now; their text with them.
        for (int a = 0; a < s.accepted; ++a) out.token_text.push_back(s.chunk_text[a + 1]);
        out.stages.push_back(std::move(s));
    }
    // Plain greedy decoding of as many tokens, on a session of its own: the
    // verify steps must have made exactly these.
    const std::size_t made = context.size() - first_new;
    Session plain(session.model(), SessionOptions{state.block_size, 0, out.mask});
    const std::vector<int32_t> prompt(context.begin(), context.begin() + std::ptrdiff_t(first_new));
    std::vector<float> logits =
        plain.prefill(prompt, parse_chunk_plan("full", int(prompt.size()))).last_logits;
    out.plain_tokens.push_back(argmax(logits));
    while (out.plain_tokens.size() < made) {
        logits = plain.decode_step(out.plain_tokens.back());
        out.plain_tokens.push_back(argmax(logits));
    }
}

}  // namespace

void Controller::refresh_kv(const ViewerState& state, KvSnapshot& out) {
    out = KvSnapshot{};
    const LoadedModel& eng = loaded(state.backend);
    out.backend = eng.backend().name();
    const std::vector<int32_t> tokens = encode(state);
    const int t = static_cast<int>(tokens.size());
    out.mask = mask_for(state, tokens);
    const ChunkPlan plan =
        allowed_plan(out.mask.view(), parse_chunk_plan(state.chunks, t), out.refusal);
    out.plan = plan;
    Trace trace;
    // Under a window-type mask the session gives back the blocks no later query
    // can see (BlockManager::free_forgotten): their table entries read kFreedBlock.
    Session session(eng.device(), SessionOptions{state.block_size, 0, out.mask}, &trace);
    out.block_size = session.cache().blocks().block_size();
    out.num_blocks = session.cache().blocks().num_blocks();
    out.n_layers = model_.weights.config.n_layers;
    out.bytes_per_token = session.cache().storage().bytes_per_token();
    out.n_prompt = t;
    for (int32_t id : tokens) out.token_text.push_back(model_.tokenizer->token_text(id));
    const KvRecorder rec{session, trace, out};

    // Prefill one chunk per call, so the cache can be looked at in between.
    std::vector<float> logits;
    int pos = 0;
    for (int len : plan.lengths) {
        const std::size_t before = trace.events().size();
        PrefillResult r =
            session.prefill(std::span<const int32_t>(tokens).subspan(pos, len), ChunkPlan{{len}});
        logits = std::move(r.last_logits);
        out.stages.push_back(rec.record(false, pos, len, before));
        pos += len;
    }
    // Then greedy decode steps: each appends exactly one position — or, with
    // speculation, verifies its guesses and keeps the accepted ones.
    const int max_len = model_.weights.config.max_seq_len;
    // A custom mask has rows for its file's positions only: decoding stops there too.
    const int limit = out.mask.limit() > 0 ? std::min(max_len, out.mask.limit()) : max_len;
    std::vector<int32_t> context = tokens;
    context.push_back(argmax(logits));
    if (state.speculate > 0) {
        kv_verify_steps(state, limit, rec, *model_.tokenizer, context);
    } else {
        for (int i = 0; i < state.decode_steps && session.length() < limit; ++i) {
            out.token_text.push_back(model_.tokenizer->token_text(context.back()));
            const std::size_t before = trace.events().size();
            const int first = session.length();
            logits = session.decode_step(context.back());
            out.stages.push_back(rec.record(true, first, 1, before));
            context.push_back(argmax(logits));
        }
    }
    for (const KvStage& st : out.stages) out.decode_skipped -= st.decode ? 1 : 0;
    out.decode_skipped += state.decode_steps;
}

// 5. The shared pool: several requests through one engine, step by step --------------
void Controller::refresh_serving(const ViewerState& state, ServingSnapshot& out) {
    out = ServingSnapshot{};
    ServingOptions options;
    options.backend = state.backend;
    options.block_size = state.serving_block_size;
    options.kv_blocks = state.serving_kv_blocks;
    options.prefix_cache = state.serving_prefix_cache;
    options.max_step_tokens = state.serving_step_tokens;
    // Its own Engine, not the scenes' cached one: the pool's size, block size
    // and prefix-cache switch are this scene's inputs, fixed when an Engine is made.
    out = run_serving_scenario(model_.weights, *model_.tokenizer,
                               serving_requests(*model_.tokenizer, encode(state)), options);
}

// 6. Equivalence: backend × plan against cpu-ref "full" ------------------------------------
namespace {
// The first 8 hex digits of the sha256 of a logits row's float32 bytes: what
// `plab generate --logits-digest` prints whole, short enough for a table cell.
std::string logits_digest(const std::vector<float>& logits) {
    Sha256 sha;
    sha.update(logits.data(), logits.size() * sizeof(float));
    return sha.hex().substr(0, 8);
}
}  // namespace

void Controller::refresh_equivalence(const ViewerState& state, EquivalenceSnapshot& out) {
    out = EquivalenceSnapshot{};
    const std::vector<int32_t> tokens = encode(state);
    const int t = static_cast<int>(tokens.size());
    out.n_tokens = t;
    std::vector<ChunkPlan> plans = {parse_chunk_plan("full", t), parse_chunk_plan("1", t),
                                    parse_chunk_plan(state.chunks, t), irregular_plan(t)};
    for (const ChunkPlan& p : plans) out.plans.push_back(p.to_string());
    // Held by shared_ptr: the lookups below may empty the cache (a plain
    // reference into the map dangled after many slider moves).
    const std::shared_ptr<const PrefillSnapshot> reference =
        prefill_snapshot("cpu-ref", tokens, plans[0]);
    out.reference_digest = logits_digest(reference->last_logits);
    // The scale of the fast backends' promise (1e-5 of max |logit|) and how close
    // the top two candidates are (a near tie may flip the greedy token legitimately).
    std::vector<float> sorted = reference->last_logits;
    for (float x : sorted) out.logit_scale = std::max(out.logit_scale, double(std::fabs(x)));
    std::partial_sort(sorted.begin(), sorted.begin() + std::min<std::size_t>(2, sorted.size()),
                      sorted.end(), std::greater<float>());
    out.logit_top2_gap = sorted.size() >= 2 ? double(sorted[0]) - double(sorted[1]) : INFINITY;
    for (const std::string& name : backend_names()) {
        bool is_ref = false;
        std::string shown = name;
        try {
            const Backend& backend = loaded(name).backend();
            is_ref = backend.is_reference();
            shown = backend.name();
        } catch (const std::exception& e) {
            out.backends.push_back(name);
            out.reference.push_back(false);
            for (size_t c = 0; c < plans.size(); ++c) {
                out.cells.emplace_back();
                out.errors.push_back(e.what());
                out.digests.emplace_back();
            }
            continue;
        }
        out.backends.push_back(shown);
        out.reference.push_back(is_ref);
        for (const ChunkPlan& plan : plans) {
            try {
                const std::shared_ptr<const PrefillSnapshot> s =
                    prefill_snapshot(name, tokens, plan);
                out.cells.push_back(compare_snapshots(*s, *reference));
                out.errors.emplace_back();
                out.digests.push_back(logits_digest(s->last_logits));
            } catch (const std::exception& e) {
                out.cells.emplace_back();
                out.errors.push_back(e.what());
                out.digests.emplace_back();
            }
        }
    }
}

// Prefill snapshots are kept per (backend, plan, prompt): moving the chunk-size
// slider re-runs one column, not the whole matrix (emulated GPU backends are slow).
// Emptying the cache only drops the cache's own references: a snapshot still
// held by a caller lives until that caller lets it go.
std::shared_ptr<const PrefillSnapshot> Controller::prefill_snapshot(
    const std::string& backend, const std::vector<int32_t>& tokens, const ChunkPlan& plan) {
    std::string key = backend + "|" + plan.to_string() + "|";
    for (int32_t t : tokens) key += std::to_string(t) + ",";
    auto it = snapshots_.find(key);
    if (it != snapshots_.end()) return it->second;
    if (snapshots_.size() >= kMaxSnapshots) snapshots_.clear();
    auto s = std::make_shared<const PrefillSnapshot>(
        run_prefill_snapshot(loaded(backend).device(), tokens, plan));
    snapshots_.emplace(key, s);
    return s;
}

// 7. Timeline: one whole request under a Trace --------------------------------------------
void Controller::refresh_timeline(const ViewerState& state, TimelineSnapshot& out) {
    out = TimelineSnapshot{};
    const LoadedModel& eng = loaded(state.backend);
    out.backend = eng.backend().name();
    const std::vector<int32_t> tokens = encode(state);
    GenerateOptions options;
    options.session.mask = mask_for(state, tokens);
    out.mask = options.session.mask.spec();
    options.chunks =
        allowed_plan(options.session.mask.view(),
                     parse_chunk_plan(state.chunks, static_cast<int>(tokens.size())), out.refusal)
            .to_string();
    options.max_new_tokens = state.new_tokens;
    // A custom mask has rows for its file's positions only: generate no further.
    const int limit = options.session.mask.limit();
    if (limit > 0)
        options.max_new_tokens =
            std::clamp(limit - static_cast<int>(tokens.size()), 1, state.new_tokens);
    options.stop_at_eos = false;
    Trace trace;
    GenerateResult r =
        generate(eng.device(), *model_.tokenizer, state.prompt, tokens, options, trace);
    out.events = trace.events();
    out.ttft_us = r.ttft_us;
    out.prefill_us = r.prefill_us;
    out.n_prompt = static_cast<int>(r.prompt_tokens.size());
    out.output_text = r.text;
    out.plan = options.chunks;
}

// 8. Serving: a Poisson workload replayed by plab::serve on the virtual clock -------------
void Controller::refresh_replay(const ViewerState& state, ReplaySnapshot& out) {
    out = ReplaySnapshot{};
    // Its own engine inside serve(): the policy, budget and pool are its
    // inputs. Its backend is the replay's own (serving_replay.h), not the bar's.
    out = run_replay(model_, state.replay);
}

}  // namespace plab::viewer
