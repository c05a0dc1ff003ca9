// The viewer's Serving panel without a window (issue 11, item 6).
//
// The panel draws a ReplaySnapshot: a generated workload served by plab::serve
// on the virtual clock. These tests check that the snapshot is the report's
// answer, not a picture of one: every step of the report appears on the rows
// of exactly the requests it names, with their token counts and decode flags;
// a second serve() of the same workload gives the same summary; every policy
// passes the self-check; the self-check fails on a snapshot that is wrong in
// one place (a step over budget, spans out of order, a queued span that ends
// elsewhere, a token count off by one, a percentile not the summary's); and
// bad options are refused with one line.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>

#include "app/controller.h"
#include "app/serving_replay.h"
#include "checks/self_check.h"
#include "core/error.h"
#include "model/tokenizers/tokenizer.h"
#include "model/weights.h"
#include "serving/workload.h"
#include "test_util.h"
#include "tiny_model.h"

namespace plab::viewer {
namespace {

// tests/viewer/tiny_model.h, with a 256-token context.
Model tiny_model() {
    return plab::test::tiny_viewer_model(256, 2027);
}

const Model& model() {
    static const Model m = tiny_model();
    return m;
}

// The tiny model's steps cost little more than the virtual clock's fixed 20 us,
// so it needs far more requests per second than the panel's default (150/s on
// the shipped model) to keep several in flight at once.
constexpr double kBusyRate = 20000;

ReplayOptions busy() {
    ReplayOptions o;
    o.rate = kBusyRate;
    return o;
}

ReplaySnapshot replay_of(const ReplayOptions& o) {
    ReplaySnapshot rp = run_replay(model(), o);
    rp.ready = true;
    return rp;
}

bool fails(const ReplaySnapshot& rp, const std::string& why) {
    const CheckResult r = check_replay(rp);
    INFO(r.line);
    return !r.ok && r.line.find(why) != std::string::npos;
}

}  // namespace

TEST_CASE("viewer replay: the rows are the report's steps, and the check passes",
          "[viewer][replay]") {
    const ReplayOptions o = busy();  // the panel's defaults, but busy for this model
    const ReplaySnapshot rp = replay_of(o);
    const CheckResult check = check_replay(rp);
    INFO(check.line);
    REQUIRE(check.ok);
    REQUIRE(rp.rows.size() == static_cast<std::size_t>(o.requests));
    // The picture shows what the panel is for: a prompt split across steps
    // (chunked prefill), a step that mixes a prompt chunk with decode tokens,
    // and a preemption (the pool of 36 blocks is too small for the busiest moment).
    REQUIRE(rp.report.summary.preemptions > 0);
    bool split = false, mixed = false;
    std::map<int, int> prefill_steps;
    for (const StepRecord& s : rp.report.steps) {
        mixed = mixed || (s.prefill_tokens > 0 && s.decode_tokens > 0);
        for (std::size_t i = 0; i < s.requests.size(); ++i)
            if (!s.decode[i]) split = split || ++prefill_steps[s.requests[i]] > 1;
    }
    REQUIRE(split);
    REQUIRE(mixed);
    // Every (step, request) of the report is on that request's row, once, with
    // the step's token count and decode flag; and nothing else is.
    std::size_t pairs = 0;
    for (const StepRecord& s : rp.report.steps) {
        for (std::size_t i = 0; i < s.requests.size(); ++i) {
            const ReplayRow& row = rp.rows.at(static_cast<std::size_t>(s.requests[i]));
            int found = 0;
            for (const ReplaySpan& sp : row.spans)
                if (sp.step == s.index) {
                    ++found;
                    REQUIRE(sp.tokens == s.tokens[i]);
                    REQUIRE(sp.decode == s.decode[i]);
                    REQUIRE(sp.start_us == s.start_us);
                }
            REQUIRE(found == 1);
            ++pairs;
        }
    }
    std::size_t spans = 0;
    for (const ReplayRow& row : rp.rows) spans += row.spans.size();
    REQUIRE(spans == pairs);

    // Deterministic: serve() called again on the same workload gives the same summary.
    WorkloadGenerator g;
    g.rate = o.rate;
    g.requests = o.requests;
    g.seed = o.seed;
    g.prompt_min = o.prompt_min;
    g.prompt_max = std::min(o.prompt_max, model().weights.config.max_seq_len - 1);
    g.new_min = o.new_min;
    g.new_max = o.new_max;
    ServeOptions so;
    so.engine.backend = o.backend;
    so.engine.block_size = o.block_size;
    so.engine.kv_blocks = o.kv_blocks;
    so.engine.policy = Policy::chunked;
    so.engine.max_step_tokens = o.token_budget;
    so.seed = o.seed;
    const ServeReport again = serve(model(), generate_workload(g), so);
    REQUIRE(again.summary.ttft_ms.p99 == rp.report.summary.ttft_ms.p99);
    REQUIRE(again.summary.itl_ms.p50 == rp.report.summary.itl_ms.p50);
    REQUIRE(again.steps.size() == rp.report.steps.size());
}

TEST_CASE("viewer replay: every policy passes, and a network delay moves only the client's TTFT",
          "[viewer][replay]") {
    for (Policy p :
         {Policy::one_at_a_time, Policy::static_batch, Policy::continuous, Policy::chunked}) {
        ReplayOptions o = busy();
        o.policy = p;
        const auto t0 = std::chrono::steady_clock::now();
        const ReplaySnapshot rp = replay_of(o);
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        std::printf("replay %s: %.1f ms (tiny model, backend %s)\n", policy_name(p).c_str(), ms,
                    o.backend.c_str());
        const CheckResult check = check_replay(rp);
        INFO(check.line);
        REQUIRE(check.ok);
        // Without chunking a prompt is one span: one prefill span per
        // admission (one, plus one per preemption).
        if (p != Policy::chunked)
            for (const ReplayRow& row : rp.rows) {
                int prefill = 0;
                for (const ReplaySpan& s : row.spans) prefill += s.decode ? 0 : 1;
                REQUIRE(prefill == 1 + row.preemptions);
            }
    }
    ReplayOptions o = busy();
    const ReplaySnapshot base = replay_of(o);
    o.network_delay_ms = 3;
    const ReplaySnapshot late = replay_of(o);
    REQUIRE(check_replay(late).ok);
    REQUIRE(late.report.steps.size() == base.report.steps.size());
    for (std::size_t i = 0; i < late.rows.size(); ++i) {
        REQUIRE(late.rows[i].token_us == base.rows[i].token_us);  // the engine does not wait
        REQUIRE(late.rows[i].client_first_token_us ==
                Approx(base.rows[i].token_us.front() + 3000).margin(1e-6));
    }
    REQUIRE(late.end_us == Approx(base.end_us + 3000).margin(1e-6));
}

TEST_CASE("viewer replay: the self-check fails on a corrupted snapshot", "[viewer][replay]") {
    const ReplaySnapshot good = replay_of(busy());
    REQUIRE(check_replay(good).ok);

    SECTION("a step over the token budget") {
        ReplaySnapshot bad = good;
        StepRecord& s = bad.report.steps.front();
        const int extra = bad.token_budget + 1 - s.prefill_tokens - s.decode_tokens;
        s.tokens.front() += extra;
        s.prefill_tokens += extra;
        REQUIRE(fails(bad, "budget"));
    }
    SECTION("two spans of a request out of order") {
        ReplaySnapshot bad = good;
        for (ReplayRow& row : bad.rows)
            if (row.spans.size() >= 3) {
                std::swap(row.spans[1], row.spans[2]);
                break;
            }
        REQUIRE(fails(bad, "out of order or overlap"));
    }
    SECTION("a span that overlaps the next one") {
        ReplaySnapshot bad = good;
        bad.rows.back().spans.front().us += 1e3;
        REQUIRE(fails(bad, "out of order or overlap"));
    }
    SECTION("a queued span that does not end at the first step") {
        ReplaySnapshot bad = good;
        bad.rows[1].first_scheduled_us += 5;
        REQUIRE(fails(bad, "queued span ends"));
    }
    SECTION("a token count off by one") {
        ReplaySnapshot bad = good;
        bad.rows[2].spans.back().tokens += 1;
        REQUIRE(fails(bad, "spans sum to"));
    }
    SECTION("a percentile that is not the summary's") {
        ReplaySnapshot bad = good;
        bad.itl_pct.p99 += 0.001;
        REQUIRE(fails(bad, "percentiles differ"));
    }
    SECTION("a lost preemption mark") {
        ReplaySnapshot bad = good;
        bad.rows[0].preemptions += 1;
        REQUIRE(!check_replay(bad).ok);
    }
}

TEST_CASE("viewer replay: bad options, one line each", "[viewer][replay]") {
    auto message = [](ReplayOptions o) {
        try {
            o.validate();
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    ReplayOptions o;
    o.rate = 0;
    REQUIRE(message(o).find("--rate 0 must be > 0") != std::string::npos);
    o = {};
    o.requests = 0;
    REQUIRE(message(o).find("--requests 0 must be 1..64") != std::string::npos);
    o = {};
    o.token_budget = 0;
    REQUIRE(message(o).find("--token-budget 0") != std::string::npos);
    o = {};
    o.network_delay_ms = -1;
    REQUIRE(message(o).find("--network-delay-ms -1 must be >= 0") != std::string::npos);
    REQUIRE(message(ReplayOptions{}).empty());
}

}  // namespace plab::viewer
