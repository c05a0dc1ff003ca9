// The scheduler alone, with no model (issue 11, item 1): random workloads
// under every policy, the steps "run" by pretending each scheduled span was
// computed and sampling a made-up token when a request's tokens are all
// computed. What must hold at every step: the token budget, decode before
// prefill, first come first served, every block returned.
#include <catch2/catch.hpp>
#include <memory>
#include <random>
#include <set>

#include "runtime/block_manager.h"
#include "runtime/prefix_cache.h"
#include "runtime/scheduler.h"
#include "test_util.h"

namespace plab::test {
namespace {

struct RequestSet {
    std::vector<std::unique_ptr<Request>> requests;
};

std::unique_ptr<Request> make_request(int id, int prompt, int max_new, std::mt19937& rng,
                                      const std::vector<int32_t>& shared_prefix) {
    auto r = std::make_unique<Request>(SamplerOptions{});
    r->id = id;
    r->seq.id = id;
    r->prompt = shared_prefix;
    const auto tail = random_tokens(prompt, 50, rng());
    r->prompt.insert(r->prompt.end(), tail.begin(), tail.end());
    r->tokens = r->prompt;
    r->new_limit = max_new;
    return r;
}

struct Run {
    int steps = 0;
    long long preemptions = 0;
    std::vector<int> first_admission;  // ids in the order they were first admitted
};

// Drives the scheduler to completion, checking the invariants at every step.
Run drive(Scheduler& sched, BlockManager& pool, RequestSet& w, std::mt19937& rng) {
    Run run;
    const SchedulerOptions& o = sched.options();
    for (auto& r : w.requests) sched.add(*r);
    while (sched.has_unfinished()) {
        REQUIRE(run.steps < 10000);  // every admitted request finishes
        // Running requests waiting for their decode token before this step.
        std::set<int> decode_ready;
        for (Request* r : sched.running())
            if (static_cast<int>(r->tokens.size()) - r->seq.length == 1) decode_ready.insert(r->id);
        const bool was_empty = sched.running().empty();
        const Schedule s = sched.schedule();
        ++run.steps;
        REQUIRE_FALSE(s.spans.empty());
        // The budget is never exceeded.
        REQUIRE(s.prefill_tokens + s.decode_tokens <= o.max_step_tokens);
        int total = 0;
        std::set<int> in_step;
        for (const ScheduledSpan& sp : s.spans) {
            total += sp.n_tokens;
            REQUIRE(in_step.insert(sp.request->id).second);  // one span per request
            REQUIRE(static_cast<int>(sp.slots.size()) == sp.n_tokens);
            REQUIRE(sp.request->seq.length <= static_cast<int>(sp.request->tokens.size()));
        }
        REQUIRE(total == s.prefill_tokens + s.decode_tokens);
        // Decode is never starved: each request ready to decode got its token
        // or was preempted in this step.
        for (int id : decode_ready) {
            const bool preempted =
                std::find(s.preempted.begin(), s.preempted.end(), id) != s.preempted.end();
            REQUIRE((in_step.count(id) == 1 || preempted));
        }
        // A preempted request gave every block back.
        for (int id : s.preempted) {
            const Request& r = *w.requests[static_cast<std::size_t>(id)];
            REQUIRE(r.seq.block_table.empty());
            REQUIRE(r.seq.length == 0);
            REQUIRE(r.state == RequestState::waiting);
        }
        run.preemptions += static_cast<long long>(s.preempted.size());
        // Policies.
        int running = static_cast<int>(sched.running().size());
        REQUIRE(running <= o.max_running);
        if (o.policy == Policy::one_at_a_time) REQUIRE(running <= 1);
        for (const ScheduledSpan& sp : s.spans) {
            Request& r = *sp.request;
            const bool admitted_now =
                std::find(run.first_admission.begin(), run.first_admission.end(), r.id) ==
                run.first_admission.end();
            if (admitted_now) {
                run.first_admission.push_back(r.id);
                // Static batches start only in an empty engine.
                if (o.policy == Policy::static_batch || o.policy == Policy::one_at_a_time)
                    REQUIRE(was_empty);
            }
            // Without chunking, every span ends at the request's last known token.
            if (o.policy != Policy::chunked)
                REQUIRE(r.seq.length == static_cast<int>(r.tokens.size()));
        }
        // "Compute" the step: a request with all tokens computed samples one.
        for (const ScheduledSpan& sp : s.spans) {
            Request& r = *sp.request;
            if (r.seq.length < static_cast<int>(r.tokens.size())) continue;
            r.tokens.push_back(static_cast<int32_t>(rng() % 50));
            if (static_cast<int>(r.tokens.size() - r.prompt.size()) >= r.new_limit) sched.finish(r);
        }
    }
    // Every block returned.
    REQUIRE(pool.blocks_in_use() == 0);
    for (int b = 0; b < pool.num_blocks(); ++b) REQUIRE(pool.ref_count(b) == 0);
    for (auto& r : w.requests) REQUIRE(r->state == RequestState::finished);
    return run;
}

}  // namespace

TEST_CASE("scheduler: budget, decode first, FCFS, every block back, under every policy",
          "[scheduler]") {
    // Pure bookkeeping: the scheduler and its pool run without a model or backend.
    long long preemptions = 0;
    for (Policy policy :
         {Policy::one_at_a_time, Policy::static_batch, Policy::continuous, Policy::chunked}) {
        for (std::uint32_t seed = 1; seed <= 6; ++seed) {
            INFO("policy " << policy_name(policy) << ", seed " << seed);
            std::mt19937 rng(seed);
            const int B = std::uniform_int_distribution<int>(1, 8)(rng);
            // Small pools force preemption; the largest request must still fit.
            const int blocks = (90 + B - 1) / B + std::uniform_int_distribution<int>(0, 30)(rng);
            BlockManager pool(B, blocks);
            PrefixCache prefix_cache(pool);
            SchedulerOptions o;
            o.policy = policy;
            o.max_step_tokens =
                policy == Policy::chunked ? std::uniform_int_distribution<int>(4, 64)(rng) : 128;
            o.max_running = std::uniform_int_distribution<int>(1, 8)(rng);
            o.prefix_cache = seed % 2 == 0;
            o.salt = 7;
            Scheduler sched(pool, prefix_cache, o);
            RequestSet w;
            const std::vector<int32_t> prefix = random_tokens(12, 50, seed);
            for (int i = 0; i < 12; ++i) {
                const int prompt = std::uniform_int_distribution<int>(1, 60)(rng);
                const int max_new = std::uniform_int_distribution<int>(1, 30)(rng);
                w.requests.push_back(make_request(i, prompt, max_new, rng,
                                                  i % 3 == 0 ? prefix : std::vector<int32_t>{}));
            }
            const Run run = drive(sched, pool, w, rng);
            // First come, first served: first admissions in arrival order.
            for (std::size_t i = 0; i < run.first_admission.size(); ++i)
                REQUIRE(run.first_admission[i] == static_cast<int>(i));
            REQUIRE(run.preemptions == sched.preemptions());
            preemptions += run.preemptions;
        }
    }
    REQUIRE(preemptions > 0);  // the small pools did make the scheduler preempt
}

TEST_CASE("scheduler: chunked prefill splits a long prompt and keeps others decoding",
          "[scheduler]") {
    BlockManager pool(4, 64);
    PrefixCache prefix(pool);
    SchedulerOptions o;
    o.max_step_tokens = 16;
    o.prefix_cache = false;
    Scheduler sched(pool, prefix, o);
    std::mt19937 rng(1);
    RequestSet w;
    w.requests.push_back(make_request(0, 5, 20, rng, {}));
    w.requests.push_back(make_request(1, 100, 2, rng, {}));
    sched.add(*w.requests[0]);
    Schedule s = sched.schedule();
    REQUIRE(s.prefill_tokens == 5);
    w.requests[0]->tokens.push_back(1);  // its first new token
    sched.add(*w.requests[1]);
    // Now every step holds request 0's decode token and a 15-token chunk of request 1.
    for (int step = 0; step < 6; ++step) {
        s = sched.schedule();
        REQUIRE(s.decode_tokens == 1);
        REQUIRE(s.prefill_tokens == std::min(15, 100 - 15 * step));
        REQUIRE(s.spans[0].request->id == 0);  // decode first
        w.requests[0]->tokens.push_back(1);
    }
    REQUIRE(w.requests[1]->seq.length == 90);
}

TEST_CASE("scheduler: policy names", "[scheduler]") {
    for (Policy p :
         {Policy::one_at_a_time, Policy::static_batch, Policy::continuous, Policy::chunked})
        REQUIRE(parse_policy(policy_name(p)) == p);
    require_error([] { parse_policy("fifo"); },
                  "unknown policy 'fifo'; valid policies: one-at-a-time, static, continuous, "
                  "chunked");
}

}  // namespace plab::test

namespace plab::test {

TEST_CASE("the policy table: one row per policy, and its users read it", "[scheduler][policy]") {
    // Every enumerator once, names unique and parsed back, the scheduler's flags
    // consistent with each name's meaning.
    std::set<int> seen;
    std::set<std::string> names;
    for (const PolicyRow& r : kPolicies) {
        INFO(r.name);
        CHECK(seen.insert(static_cast<int>(r.policy)).second);
        CHECK(names.insert(r.name).second);
        CHECK(parse_policy(r.name) == r.policy);
        CHECK(policy_name(r.policy) == r.name);
        CHECK(policy_names().find(r.name) != std::string::npos);
        CHECK(std::string(r.what).size() > 10);
    }
    CHECK(seen == std::set<int>{0, 1, 2, 3});  // Policy's four enumerators
    CHECK(policy_row(Policy::chunked).chunks_prompts);
    CHECK(policy_row(Policy::one_at_a_time).one_at_a_time);
    require_error([] { parse_policy("fifo"); },
                  "unknown policy 'fifo'; valid policies: " + policy_names());
}

}  // namespace plab::test
