// Speculative decoding inside the engine (EngineOptions::speculative): many
// requests verify their guesses as spans of the same steps.
//
// What it shows: with greedy sampling every request makes plain decoding's
// tokens and samples from the very same logits rows (bit for bit), for every
// K from 1 to 8 and both draft sources, on cpu-ref, cpu (invariant kernels)
// and the emulated gpu — also when the token budget leaves no room for the
// guesses and when the pool is so small that requests are preempted; under
// sampling the engine makes the one-prompt path's tokens; the pool holds no
// K/V past the accepted tokens after any step; and the prefix cache names
// only blocks of accepted tokens (a later request that hits them computes
// exactly what it would without the cache).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "model/model_io.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/registry.h"
#include "test_util.h"

using namespace plab;

namespace {

const Model& shipped() {
    static const Model m = load_model(std::string(PLAB_TESTS_DIR) + "/../assets/model");
    return m;
}

// Four prompts: two repeat themselves (prompt lookup finds its n-grams), one
// is the default story opening, one is a single BOS token.
std::vector<std::vector<int32_t>> prompts() {
    const Tokenizer& tok = *shipped().tokenizer;
    return {tok.encode(kDefaultPrompt, true),
            tok.encode("Tom had a red ball. Tom had a red ball. Tom had a", true),
            tok.encode("The cat sat on the mat and the dog sat on the", true),
            {tok.bos_id()}};
}

struct EngineRun {
    std::vector<std::vector<int32_t>> tokens;             // new tokens per request
    std::vector<std::vector<std::vector<float>>> logits;  // rows sampled from, per request
    std::vector<SpeculativeStats> stats;
    int verify_spans = 0;
    long long preemptions = 0;
};

struct RunSetup {
    const char* backend = "cpu-ref";
    int k = 0;
    std::string draft;
    const DeviceModel* draft_model = nullptr;
    int max_new = 24;
    int budget = 512;
    int kv_blocks = 0;
    int block_size = 16;
    SamplerOptions sampler{};
    bool keep_logits = true;
};

EngineRun run_engine(const LoadedModel& target, const RunSetup& s) {
    EngineOptions eo;
    eo.block_size = s.block_size;
    eo.kv_blocks = s.kv_blocks;
    eo.max_step_tokens = s.budget;
    eo.speculative.k = s.k;
    if (s.k > 0) {
        eo.speculative.draft = parse_draft_source(s.draft);
        eo.speculative.draft_model = s.draft_model;
    }
    Engine engine(target, eo);
    for (const std::vector<int32_t>& p : prompts()) {
        RequestOptions ro;
        ro.max_new_tokens = s.max_new;
        ro.sampler = s.sampler;
        ro.keep_logits = s.keep_logits;
        engine.add_request(p, ro);
    }
    EngineRun out;
    while (engine.has_unfinished()) {
        const StepRecord& rec = engine.step();
        for (int g : rec.guesses) out.verify_spans += g > 0 ? 1 : 0;
        // No K/V past the accepted tokens: a decoding request holds exactly
        // its known tokens but the newest, in ceil(length / B) blocks.
        int blocks = 0;
        for (int id = 0; id < engine.num_requests(); ++id) {
            const Request& r = engine.request(id);
            if (r.state != RequestState::running) continue;
            CHECK(r.seq.length <= static_cast<int>(r.tokens.size()));
            blocks += (r.seq.length + s.block_size - 1) / s.block_size;
        }
        CHECK(engine.pool_stats().blocks_in_use <= blocks);
    }
    CHECK(engine.pool_stats().blocks_in_use == 0);
    out.preemptions = engine.pool_stats().preemptions;
    for (int id = 0; id < engine.num_requests(); ++id) {
        const Request& r = engine.request(id);
        out.tokens.emplace_back(r.new_tokens().begin(), r.new_tokens().end());
        out.logits.push_back(r.logits);
        out.stats.push_back(r.speculation.stats);
    }
    return out;
}

bool same_rows(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (!test::same_bits(a[i], b[i])) return false;
    return true;
}

// Greedy: the tokens and the rows they came from equal plain decoding's, for
// every K in `ks` and both draft sources (prompt lookup with N = 1 and 3; a
// random draft model, mostly rejected, and the target itself, all accepted).
void require_plain_rows(const char* backend, const std::vector<int>& ks, int max_new) {
    const LoadedModel target(shipped().weights, backend, Kernels::invariant);
    ModelConfig dc = test::small_config(32, 1, 2, 1, 16, 64, 512, 512);
    const LoadedModel random_draft(make_random_weights(dc, 7), backend, Kernels::invariant);
    RunSetup plain_setup;
    plain_setup.backend = backend;
    plain_setup.max_new = max_new;
    const EngineRun plain = run_engine(target, plain_setup);
    // Without kept logits the plain engine samples on the device: same tokens.
    RunSetup device_setup = plain_setup;
    device_setup.keep_logits = false;
    CHECK(run_engine(target, device_setup).tokens == plain.tokens);
    long long accepted = 0;
    int verify_spans = 0;
    for (int k : ks) {
        for (const char* draft : {"ngram:1", "ngram:3", "random", "self"}) {
            INFO(backend << ", K = " << k << ", draft " << draft);
            const std::string d(draft);
            RunSetup s = plain_setup;
            s.k = k;
            s.draft = d == "random" || d == "self" ? "model" : d;
            s.draft_model = d == "random" ? &random_draft.device()
                            : d == "self" ? &target.device()
                                          : nullptr;
            const EngineRun r = run_engine(target, s);
            CHECK(r.tokens == plain.tokens);
            CHECK(same_rows(r.logits[0], plain.logits[0]));
            for (std::size_t i = 0; i < r.tokens.size(); ++i) {
                INFO("request " << i);
                CHECK(same_rows(r.logits[i], plain.logits[i]));
                const SpeculativeStats& st = r.stats[i];
                CHECK(st.tokens_after_first == max_new - 1);
                CHECK(st.accepted <= st.proposed);
                if (d == "self") CHECK(st.accepted == st.proposed);
                accepted += st.accepted;
            }
            verify_spans += r.verify_spans;
        }
    }
    CHECK(verify_spans > 0);
    CHECK(accepted > 0);
}

}  // namespace

TEST_CASE("engine speculation: greedy tokens and sampled rows equal plain decoding's on cpu-ref",
          "[speculative][engine]") {
    require_plain_rows("cpu-ref", {1, 2, 3, 4, 5, 6, 7, 8}, 24);
}

TEST_CASE("engine speculation: greedy tokens and sampled rows equal plain decoding's on cpu",
          "[speculative][engine]") {
    require_plain_rows("cpu", {1, 4, 8}, 24);
}

TEST_CASE("engine speculation: greedy tokens and sampled rows equal plain decoding's on the gpu",
          "[speculative][engine][gpu]") {
    // Emulated here: K = 2 and 8 and a short run (every K runs on cpu-ref).
    require_plain_rows("gpu", {2, 8}, 10);
}

TEST_CASE("engine speculation: a tight token budget and preemption keep the tokens",
          "[speculative][engine]") {
    const LoadedModel target(shipped().weights, "cpu-ref", Kernels::invariant);
    RunSetup plain_setup;
    plain_setup.max_new = 20;
    const EngineRun plain = run_engine(target, plain_setup);
    // A budget of 6 with four requests decoding: at most 2 guesses a step fit,
    // so most verify spans shrink to the token alone.
    RunSetup tight = plain_setup;
    tight.k = 4;
    tight.draft = "ngram:1";
    tight.budget = 6;
    const EngineRun t = run_engine(target, tight);
    CHECK(t.tokens == plain.tokens);
    CHECK(t.verify_spans > 0);
    for (std::size_t i = 0; i < t.logits.size(); ++i)
        CHECK(same_rows(t.logits[i], plain.logits[i]));
    // Blocks of 4 positions, 14 in the pool: the requests cannot all hold
    // their sequences, the newest is preempted and recomputed, guesses dropped.
    RunSetup small = tight;
    small.budget = 512;
    small.block_size = 4;
    small.kv_blocks = 14;
    RunSetup small_plain = plain_setup;
    small_plain.block_size = 4;
    small_plain.kv_blocks = 14;
    const EngineRun sp = run_engine(target, small_plain);
    const EngineRun s = run_engine(target, small);
    CHECK(s.preemptions > 0);
    CHECK(s.verify_spans > 0);
    CHECK(s.tokens == plain.tokens);
    CHECK(sp.tokens == plain.tokens);
    for (std::size_t i = 0; i < s.logits.size(); ++i) CHECK(same_rows(s.logits[i], sp.logits[i]));
}

TEST_CASE("engine speculation: under sampling the engine makes the one-prompt path's tokens",
          "[speculative][engine]") {
    const LoadedModel target(shipped().weights, "cpu-ref", Kernels::invariant);
    ModelConfig dc = test::small_config(32, 1, 2, 1, 16, 64, 512, 512);
    const LoadedModel random_draft(make_random_weights(dc, 7), "cpu-ref", Kernels::invariant);
    SamplerOptions sampler;
    sampler.temperature = 0.9f;
    sampler.top_k = 40;
    sampler.top_p = 0.95f;
    sampler.seed = 11;
    for (const char* draft : {"ngram:2", "random"}) {
        INFO("draft " << draft);
        const bool model = std::string(draft) == "random";
        RunSetup s;
        s.k = 3;
        s.draft = model ? "model" : draft;
        s.draft_model = model ? &random_draft.device() : nullptr;
        s.sampler = sampler;
        s.max_new = 20;
        const EngineRun e = run_engine(target, s);
        // The same request alone through generate(): the same streams
        // (the sampler's for the first token, the rule's and the draft's after).
        for (std::size_t i = 0; i < prompts().size(); ++i) {
            GenerateOptions o;
            o.max_new_tokens = 20;
            o.stop_at_eos = false;
            o.sampler = sampler;
            o.speculative.k = 3;
            o.speculative.draft = parse_draft_source(s.draft);
            o.speculative.draft_model = s.draft_model;
            Trace trace;
            const GenerateResult g =
                generate(target.device(), *shipped().tokenizer, "", prompts()[i], o, trace);
            CHECK(g.new_tokens == e.tokens[i]);
            CHECK(g.speculative.accepted == e.stats[i].accepted);
        }
    }
}

TEST_CASE("engine speculation: the prefix cache names only blocks of accepted tokens",
          "[speculative][engine]") {
    const LoadedModel target(shipped().weights, "cpu-ref", Kernels::invariant);
    ModelConfig dc = test::small_config(32, 1, 2, 1, 16, 64, 512, 512);
    const LoadedModel random_draft(make_random_weights(dc, 7), "cpu-ref", Kernels::invariant);
    const std::vector<int32_t> prompt = prompts()[0];
    // A: a random draft, K = 8: nearly every verify span reserves blocks of
    // guesses that are then rejected.
    EngineOptions eo;
    eo.block_size = 4;
    eo.speculative.k = 8;
    eo.speculative.draft = parse_draft_source("model");
    eo.speculative.draft_model = &random_draft.device();
    Engine engine(target, eo);
    RequestOptions ro;
    ro.max_new_tokens = 40;
    ro.keep_logits = true;
    const int a = engine.add_request(prompt, ro);
    engine.run();
    REQUIRE(engine.request(a).speculation.stats.proposed >
            engine.request(a).speculation.stats.accepted);
    // B: A's sequence continued. Its blocks come from the prefix cache, named
    // during A's verify steps; were one to hold a rejected guess's K/V, B's
    // logits would differ from a run without the cache.
    std::vector<int32_t> b_prompt = engine.request(a).tokens;
    const int b = engine.add_request(b_prompt, ro);
    engine.run();
    const int full_blocks = (static_cast<int>(b_prompt.size()) - 1) / 4;
    CHECK(engine.request(b).cached_tokens == full_blocks * 4);
    CHECK(engine.request(b).cached_tokens > static_cast<int>(prompt.size()) + 16);
    EngineOptions cold;
    cold.block_size = 4;
    cold.prefix_cache = false;
    Engine reference(target, cold);
    const int c = reference.add_request(b_prompt, ro);
    reference.run();
    CHECK(engine.request(b).new_tokens().size() == reference.request(c).new_tokens().size());
    CHECK(std::equal(engine.request(b).new_tokens().begin(), engine.request(b).new_tokens().end(),
                     reference.request(c).new_tokens().begin()));
    CHECK(same_rows(engine.request(b).logits, reference.request(c).logits));
}

TEST_CASE("engine speculation: a draft of another vocabulary is refused in one line",
          "[speculative][engine]") {
    const LoadedModel target(shipped().weights, "cpu-ref", Kernels::invariant);
    ModelConfig dc = test::small_config(32, 1, 2, 1, 16, 64, 258, 512);
    const LoadedModel byte_draft(make_random_weights(dc, 7), "cpu-ref", Kernels::invariant);
    EngineOptions eo;
    eo.speculative.k = 2;
    eo.speculative.draft = parse_draft_source("model");
    eo.speculative.draft_model = &byte_draft.device();
    test::require_error([&] { Engine e(target, eo); },
                        "--draft model has a vocabulary of 258 tokens, the target 512");
    eo.speculative.k = 9;
    test::require_error([&] { Engine e(target, eo); }, "--speculate 9: guesses per verify step");
}

TEST_CASE("engine speculation: plab generate --prompts --speculate keeps tokens and digests",
          "[speculative][engine][cli]") {
    const std::filesystem::path dir = test::process_temp_dir("spec_prompts");
    const std::string file = (dir / "prompts.txt").string();
    {
        std::ofstream f(file);
        f << "{\"prompt\": \"Tom had a red ball. Tom had a red ball. Tom had a\"}\n"
          << "{\"prompt\": \"Once upon a time\"}\n"
          << "{\"prompt\": \"The cat sat on the mat and the dog sat on the\", "
             "\"max_new_tokens\": 7}\n";
    }
    auto run = [&](std::vector<std::string> extra) {
        std::vector<std::string> args{"generate", "--prompts", file,      "-n",
                                      "16",       "--backend", "cpu-ref", "--logits-digest",
                                      "--json",   "--no-stop"};
        args.insert(args.end(), extra.begin(), extra.end());
        const test::CliResult r = test::run_cli(args);
        REQUIRE(r.exit_code == 0);
        return nlohmann::json::parse(r.out);
    };
    const nlohmann::json plain = run({});
    CHECK(!plain.contains("speculative"));
    for (const std::vector<std::string>& spec :
         {std::vector<std::string>{"--speculate", "1", "--draft", "ngram:1"},
          std::vector<std::string>{"--speculate", "4", "--draft", "ngram"},
          std::vector<std::string>{"--speculate", "8", "--draft", "assets/draft"}}) {
        INFO(spec[1] << " " << spec[3]);
        const nlohmann::json j = run(spec);
        REQUIRE(j.at("requests").size() == 3);
        long long proposed = 0, accepted = 0;
        for (std::size_t i = 0; i < 3; ++i) {
            const nlohmann::json& q = j["requests"][i];
            CHECK(q.at("new_tokens") == plain["requests"][i].at("new_tokens"));
            CHECK(q.at("logits_sha256") == plain["requests"][i].at("logits_sha256"));
            proposed += q.at("speculative").at("proposed").get<long long>();
            accepted += q.at("speculative").at("accepted").get<long long>();
        }
        const nlohmann::json& s = j.at("speculative");
        CHECK(s.at("k") == std::stoi(spec[1]));
        CHECK(s.at("draft") == spec[3]);
        CHECK(s.at("proposed") == proposed);
        CHECK(s.at("accepted") == accepted);
        // 15 + 15 + 6 tokens after each request's first.
        CHECK(s.at("plain_target_forwards") == 36);
        CHECK(s.at("forwards_saved") == 36 - s.at("verify_steps").get<long long>());
    }
    const test::CliResult text =
        test::run_cli({"generate", "--prompts", file, "-n", "8", "--no-stop", "--speculate", "2",
                       "--draft", "ngram:1"});
    REQUIRE(text.exit_code == 0);
    CHECK(text.out.find("speculative decoding, up to 2 guesses a verify step, draft ngram:1: ") !=
          std::string::npos);
    CHECK(text.out.find("  speculative: ") != std::string::npos);
    CHECK(text.out.find("--kernels fastest") == std::string::npos);
    // The library's kernels: the report says what may change and why.
    const test::CliResult fastest =
        test::run_cli({"generate", "--prompts", file, "-n", "8", "--no-stop", "--speculate", "2",
                       "--draft", "ngram:1", "--kernels", "fastest"});
    REQUIRE(fastest.exit_code == 0);
    CHECK(fastest.out.find("--kernels fastest: a verify span's products have K+1 rows") !=
          std::string::npos);
}
