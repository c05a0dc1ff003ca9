// The viewer's shared-pool scenario, without a window (issue 10, item 8).
//
// The KV panel's pool view and the timeline's requests view draw a
// ServingSnapshot: four requests through one Engine with a small pool. These
// tests check that the snapshot is the engine's answer, not a picture of one:
// the same requests replayed through a second Engine give, after every step,
// the same block tables, reference counts and names; the scenario really
// shares a prefix block, preempts a request and evicts a cached block (the
// engine's own counters say so); after the last step no block is in use; and
// the self-check fails on a snapshot that is wrong in one number.
#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

#include "app/controller.h"
#include "app/serving_scenario.h"
#include "checks/self_check.h"
#include "core/kv_layout.h"
#include "model/tokenizers/tokenizer.h"
#include "model/weights.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/registry.h"
#include "test_util.h"

namespace plab::viewer {
namespace {

// A tiny seeded random model with the byte tokenizer, long enough for the
// built-in prompt (76 byte tokens with BOS) plus a continuation and new tokens.
Model tiny_model() {
    Model m;
    m.weights = make_random_weights(test::small_config(32, 2, 4, 2, 8, 48, 258, 192), 2026);
    m.tokenizer = std::make_unique<ByteTokenizer>();
    m.source = "tiny random model, seed 2026";
    return m;
}

ViewerState scenario_state() {
    ViewerState s;
    s.prompt = kDefaultPrompt;  // what the viewer opens with
    return s;
}

ServingSnapshot serving_of(Controller& ctrl, const ViewerState& st) {
    ServingSnapshot sv;
    ctrl.refresh_serving(st, sv);
    sv.ready = true;
    return sv;
}

// Blocks with more than one owner in a stage, and the largest such count.
int most_owners(const ServingStage& st) {
    int most = 0;
    for (const PoolBlock& b : st.blocks) most = std::max(most, static_cast<int>(b.owners.size()));
    return most;
}

}  // namespace

TEST_CASE("viewer serving: each step's pool is the engine's, replayed through a second engine",
          "[viewer][serving]") {
    Controller ctrl(tiny_model());
    const ViewerState st = scenario_state();
    const ServingSnapshot sv = serving_of(ctrl, st);
    const CheckResult check = check_serving(sv);
    INFO(check.line);
    REQUIRE(check.ok);

    // The oracle: the same requests through an Engine of the test's own, read
    // directly (its block tables, BlockManager::ref_count and is_cached) after each step.
    const Model& model = ctrl.model();
    const std::vector<ServingRequestSpec> specs =
        serving_requests(*model.tokenizer, model.tokenizer->encode(st.prompt, true));
    REQUIRE(specs.size() == 4);
    ServingOptions so;
    so.block_size = st.serving_block_size;
    so.kv_blocks = st.serving_kv_blocks;
    so.max_step_tokens = st.serving_step_tokens;
    EngineOptions eo;
    eo.backend = st.backend;
    eo.block_size = so.block_size;
    eo.kv_blocks = serving_pool_blocks(specs, model.weights.config.max_seq_len, so);
    eo.max_step_tokens = so.max_step_tokens;
    Engine engine(model.weights, eo);
    for (const ServingRequestSpec& spec : specs) {
        RequestOptions ro;
        ro.max_new_tokens = spec.max_new_tokens;
        engine.add_request(spec.prompt, ro);
    }
    REQUIRE(sv.num_blocks == engine.cache().blocks().num_blocks());
    std::size_t k = 0;
    while (true) {
        INFO("stage " << k);
        REQUIRE(k < sv.stages.size());
        const ServingStage& stage = sv.stages[k];
        for (int id = 0; id < engine.num_requests(); ++id) {
            INFO("request " << id);
            REQUIRE(stage.requests[id].block_table == engine.request(id).seq.block_table);
        }
        for (int b = 0; b < engine.cache().blocks().num_blocks(); ++b) {
            INFO("block " << b);
            const PoolBlock& blk = stage.blocks[b];
            REQUIRE(blk.ref_count == engine.cache().blocks().ref_count(b));
            REQUIRE(blk.named == engine.cache().blocks().is_cached(b));
            // Owners match the block tables: the ids whose table holds b.
            std::vector<int> owners;
            for (int id = 0; id < engine.num_requests(); ++id)
                for (int32_t e : engine.request(id).seq.block_table)
                    if (e == b) owners.push_back(id);
            REQUIRE(blk.owners == owners);
            REQUIRE((blk.state == PoolBlockState::kInUse) ==
                    (engine.cache().blocks().ref_count(b) > 0));
            REQUIRE((blk.state == PoolBlockState::kCachedFree) ==
                    (engine.cache().blocks().ref_count(b) == 0 &&
                     engine.cache().blocks().is_cached(b)));
        }
        REQUIRE(stage.pool.evictions == engine.pool_stats().evictions);
        REQUIRE(stage.pool.preemptions == engine.pool_stats().preemptions);
        if (!engine.has_unfinished()) break;
        const StepRecord& rec = engine.step();
        ++k;
        REQUIRE(k < sv.stages.size());
        REQUIRE(sv.stages[k].record.requests == rec.requests);
        REQUIRE(sv.stages[k].record.preempted == rec.preempted);
    }
    REQUIRE(k + 1 == sv.stages.size());
    for (int id = 0; id < engine.num_requests(); ++id) {
        const std::span<const int32_t> made = engine.request(id).new_tokens();
        REQUIRE(sv.requests[id].token_text.size() == engine.request(id).tokens.size());
        REQUIRE(sv.requests[id].output_text ==
                model.tokenizer->decode(std::vector<int32_t>(made.begin(), made.end())));
    }
}

TEST_CASE("viewer serving: the scenario shares a prefix block, preempts and evicts",
          "[viewer][serving]") {
    Controller ctrl(tiny_model());
    const ServingSnapshot sv = serving_of(ctrl, scenario_state());
    INFO(check_serving(sv).line);
    REQUIRE(check_serving(sv).ok);
    const PoolStats& end = sv.stages.back().pool;

    // 1. A shared prefix block: while shared, its reference count is its owner count > 1.
    int shared_steps = 0;
    for (const ServingStage& st : sv.stages)
        for (const PoolBlock& b : st.blocks)
            if (b.owners.size() > 1) {
                REQUIRE(b.ref_count == static_cast<int>(b.owners.size()));
                ++shared_steps;
            }
    REQUIRE(shared_steps > 0);
    REQUIRE(end.hit_blocks > 0);
    int cached = 0;  // the later requests found the prefix cached
    for (std::size_t id = 0; id < sv.requests.size(); ++id)
        cached += sv.requests[id].record.cached_tokens;
    REQUIRE(cached > 0);

    // 2. A preemption and an eviction, by the engine's own counters, and the
    //    steps they happened in marked.
    REQUIRE(end.preemptions >= 1);
    REQUIRE(end.evictions >= 1);
    long long marked_preempted = 0, marked_evicted = 0;
    for (const ServingStage& st : sv.stages) {
        marked_preempted += static_cast<long long>(st.record.preempted.size());
        for (const PoolBlock& b : st.blocks) marked_evicted += b.evicted ? 1 : 0;
    }
    REQUIRE(marked_preempted == end.preemptions);
    REQUIRE(marked_evicted == end.evictions);
    // Each evicted block was named before its step (a cached block or, in a step
    // that preempted, one just given back), and says whose K/V it held then.
    for (std::size_t k = 1; k < sv.stages.size(); ++k)
        for (std::size_t b = 0; b < sv.stages[k].blocks.size(); ++b) {
            const PoolBlock& blk = sv.stages[k].blocks[b];
            if (!blk.evicted) continue;
            INFO("step " << k - 1 << ", block " << b);
            const PoolBlock& before = sv.stages[k - 1].blocks[b];
            REQUIRE(before.named);
            REQUIRE_FALSE(blk.evicted_content.empty());
            REQUIRE(blk.evicted_content == before.content);
            REQUIRE(blk.evicted_logical == before.content_logical);
        }

    // 3. After the last step no block is in use, and every request finished.
    for (const PoolBlock& b : sv.stages.back().blocks) {
        REQUIRE(b.ref_count == 0);
        REQUIRE(b.owners.empty());
        REQUIRE(b.state != PoolBlockState::kInUse);
    }
    REQUIRE(end.blocks_in_use == 0);
    for (const ServingRequestState& r : sv.stages.back().requests)
        REQUIRE(r.state == RequestState::finished);

    // 4. The timeline's spans are the engine's work: per request, the tokens of
    //    its spans are its computed tokens (recomputation included), the first
    //    span starts after its prefix hit, and it has a first token and a finish.
    for (std::size_t id = 0; id < sv.requests.size(); ++id) {
        INFO("request " << id);
        const ServingRequestInfo& info = sv.requests[id];
        int computed = 0, first = -1;
        for (const ServingStage& st : sv.stages)
            for (const ServingSpan& s : st.spans)
                if (s.request == static_cast<int>(id)) {
                    computed += s.n_pos;
                    if (first < 0) first = s.first_pos;
                }
        REQUIRE(computed == info.record.computed_tokens);
        REQUIRE(first == info.record.cached_tokens);
        REQUIRE(!info.record.token_us.empty());
        REQUIRE(info.record.token_us.front() > info.record.arrival_us);
        REQUIRE(info.record.finish_us >= info.record.token_us.back());
    }
}

TEST_CASE("viewer serving: the self-check holds on every backend", "[viewer][serving]") {
    // The fast backends may pick other greedy tokens (sums in another order),
    // so the steps differ; the pool's bookkeeping must add up all the same.
    Controller ctrl(tiny_model());
    for (const std::string& name : backend_names()) {
        ViewerState st = scenario_state();
        st.backend = name;
        const ServingSnapshot sv = serving_of(ctrl, st);
        const CheckResult r = check_serving(sv);
        INFO("backend " << name << ": " << r.line);
        REQUIRE(r.ok);
        REQUIRE(sv.stages.back().pool.preemptions >= 1);
    }
}

TEST_CASE("viewer serving: a block given back by a preemption and evicted in the same step",
          "[viewer][serving]") {
    // Two block-aligned prompts of 8 tokens fill a pool of 4 blocks of B = 4
    // in step 0. In step 1 the older request's first new token needs a fifth
    // block: the newer request is preempted, its two named blocks become cached
    // free (its last block first), and with no never-named block left the older
    // one evicts that last block at once. Before the step it was in use, not
    // cached free: the snapshot must still mark it evicted (the pool counts it).
    const Model model = tiny_model();
    std::vector<ServingRequestSpec> specs(2);
    specs[0].prompt = {256, 10, 11, 12, 13, 14, 15, 16};
    specs[0].max_new_tokens = 4;  // 11 positions: 3 blocks
    specs[1].prompt = {256, 20, 21, 22, 23, 24, 25, 26};
    specs[1].max_new_tokens = 3;
    ServingOptions so;
    so.block_size = 4;
    so.kv_blocks = 4;
    so.max_step_tokens = 16;
    const ServingSnapshot sv = run_serving_scenario(model.weights, *model.tokenizer, specs, so);
    const CheckResult check = check_serving(sv);
    INFO(check.line);
    REQUIRE(check.ok);
    REQUIRE(sv.stages.size() > 2);
    const ServingStage& st = sv.stages[2];  // after step 1
    REQUIRE(st.record.preempted == std::vector<int>{1});
    REQUIRE(st.evictions == 1);
    int marked = 0;
    for (std::size_t b = 0; b < st.blocks.size(); ++b) {
        if (!st.blocks[b].evicted) continue;
        ++marked;
        REQUIRE(sv.stages[1].blocks[b].state == PoolBlockState::kInUse);
        REQUIRE(st.blocks[b].evicted_content == std::vector<int>{1});
        REQUIRE(st.blocks[b].evicted_logical == 1);  // its last block went first
        REQUIRE(st.blocks[b].owners == std::vector<int>{0});
    }
    REQUIRE(marked == 1);
}

TEST_CASE("viewer serving: prefix cache off shares nothing, caches nothing, same tokens",
          "[viewer][serving]") {
    Controller ctrl(tiny_model());
    ViewerState st = scenario_state();
    const ServingSnapshot on = serving_of(ctrl, st);
    st.serving_prefix_cache = false;
    const ServingSnapshot off = serving_of(ctrl, st);
    INFO(check_serving(off).line);
    REQUIRE(check_serving(off).ok);
    for (const ServingStage& s : off.stages) {
        REQUIRE(most_owners(s) <= 1);
        for (const PoolBlock& b : s.blocks) REQUIRE(b.state != PoolBlockState::kCachedFree);
    }
    REQUIRE(off.stages.back().pool.evictions == 0);
    REQUIRE(off.stages.back().pool.hit_blocks == 0);
    // cpu-ref is bitwise whatever shares a step, so the greedy tokens are the
    // same: the prefix cache changes what is computed, never the answer.
    REQUIRE(st.backend == "cpu-ref");
    for (std::size_t id = 0; id < on.requests.size(); ++id) {
        INFO("request " << id);
        REQUIRE(off.requests[id].record.cached_tokens == 0);
        REQUIRE(off.requests[id].token_text == on.requests[id].token_text);
        REQUIRE(off.requests[id].record.computed_tokens >= on.requests[id].record.computed_tokens);
    }
}

TEST_CASE("viewer serving: the self-check fails on a wrong owner, count, eviction or leak",
          "[viewer][serving]") {
    Controller ctrl(tiny_model());
    const ServingSnapshot sv = serving_of(ctrl, scenario_state());
    REQUIRE(check_serving(sv).ok);
    // A stage with a shared block and one with an eviction, to corrupt.
    std::size_t shared_stage = 0, shared_block = 0, evict_stage = 0, preempt_stage = 0;
    for (std::size_t k = 0; k < sv.stages.size(); ++k) {
        for (std::size_t b = 0; b < sv.stages[k].blocks.size(); ++b)
            if (sv.stages[k].blocks[b].owners.size() > 1 && shared_stage == 0) {
                shared_stage = k;
                shared_block = b;
            }
        if (sv.stages[k].evictions > 0 && evict_stage == 0) evict_stage = k;
        if (!sv.stages[k].record.preempted.empty() && preempt_stage == 0) preempt_stage = k;
    }
    REQUIRE(shared_stage > 0);
    REQUIRE(evict_stage > 0);
    REQUIRE(preempt_stage > 0);
    auto require_fails = [](const ServingSnapshot& bad, const std::string& why) {
        const CheckResult r = check_serving(bad);
        INFO(r.line);
        REQUIRE_FALSE(r.ok);
        REQUIRE(r.line.find(why) != std::string::npos);
    };
    {  // A reference the tables do not account for (a leaked reference).
        ServingSnapshot bad = sv;
        bad.stages[shared_stage].blocks[shared_block].ref_count += 1;
        require_fails(bad, "block-table entries");
    }
    {  // An owner's table lost the shared block (its length still says it holds it).
        ServingSnapshot bad = sv;
        ServingStage& s = bad.stages[shared_stage];
        const int owner = s.blocks[shared_block].owners.back();
        std::vector<int32_t>& table = s.requests[owner].block_table;
        table.erase(std::find(table.begin(), table.end(), static_cast<int32_t>(shared_block)));
        require_fails(bad, "request " + std::to_string(owner) + " holds");
    }
    {  // A shared block that has no name: only named prefix blocks may be shared.
        ServingSnapshot bad = sv;
        bad.stages[shared_stage].blocks[shared_block].named = false;
        require_fails(bad, "shared but not a named block");
    }
    {  // One eviction more than the pool counted.
        ServingSnapshot bad = sv;
        bad.stages[evict_stage].evictions += 1;
        require_fails(bad, "evictions");
    }
    {  // An evicted block not marked: the picture would hide it.
        ServingSnapshot bad = sv;
        for (PoolBlock& b : bad.stages[evict_stage].blocks) b.evicted = false;
        require_fails(bad, "named blocks written again");
    }
    {  // A block still in use after the last step (a leak).
        ServingSnapshot bad = sv;
        bad.stages.back().pool.blocks_in_use = 1;
        require_fails(bad, "blocks in use");
    }
    {  // A preempted request that still runs.
        ServingSnapshot bad = sv;
        ServingStage& s = bad.stages[preempt_stage];
        s.requests[s.record.preempted.front()].state = RequestState::running;
        require_fails(bad, "preempted but still runs or holds blocks");
    }
}

}  // namespace plab::viewer
