// Threads (issue 12): the engine's pool runs every task exactly once however
// the threads interleave; the cpu backend's threaded ops (sizes above the FLOP
// threshold, so they really split) match cpu-ref within a proven bound; cpu-ref
// gives the same bits on one thread and on many; the engine picks the thread
// count from the work; `plab bench --load` reports.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <thread>

#include "backends/cpu_fast/cpu_fast.h"
#include "core/attention_math.h"
#include "core/attention_shape.h"
#include "core/thread_pool.h"
#include "model/weights.h"
#include "runtime/device_model.h"
#include "runtime/registry.h"
#include "runtime/session.h"
#include "test_util.h"

using namespace plab;
using namespace plab::test;

namespace {

// Runs `jobs` jobs of varying task counts on `pool`; every task of every job
// must run exactly once, and a job's tasks must all be done when run() returns.
void check_every_task_once(ThreadPool& pool, int jobs, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<std::atomic<int>> hits(64);
    for (int j = 0; j < jobs; ++j) {
        const int n = 1 + int(rng() % 64);
        for (auto& h : hits) h.store(0);
        const bool slow = j % 16 == 0;  // now and then a task sleeps: others must take the rest
        pool.run(n, [&](int i) {
            if (slow && i == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
            hits[std::size_t(i)].fetch_add(1);
        });
        for (int i = 0; i < 64; ++i) {
            INFO("job " << j << " of " << n << " tasks, task " << i);
            REQUIRE(hits[std::size_t(i)].load() == (i < n ? 1 : 0));
        }
    }
}

// Fails unless |fast - ref| <= 2·k·2⁻²⁴·Σ|x·w| per output: any summation
// order of k products is within γ_k·Σ|terms| of the exact sum (Higham, eq.
// 3.5; FMA only shrinks it), so two orders are within twice that.
void require_within_sum_bound(const std::vector<float>& fast, const std::vector<float>& ref,
                              const std::vector<float>& x, const std::vector<float>& w, int m,
                              int n, int k) {
    for (int r = 0; r < m; ++r) {
        for (int c = 0; c < n; ++c) {
            double abs_sum = 0;
            for (int i = 0; i < k; ++i)
                abs_sum += std::fabs(double(x[std::size_t(r) * k + i]) * w[std::size_t(c) * k + i]);
            const std::size_t o = std::size_t(r) * n + c;
            const double bound = 2.0 * k * std::ldexp(1.0, -24) * abs_sum;
            if (!(std::fabs(double(fast[o]) - ref[o]) <= bound)) {
                FAIL("matmul " << m << "x" << n << "x" << k << " at (" << r << ", " << c
                               << "): cpu " << fast[o] << " vs cpu-ref " << ref[o]
                               << ", bound 2*k*2^-24*sum|x*w| = " << bound);
            }
        }
    }
}

std::vector<float> run_matmul(Backend& b, const std::vector<float>& x, const std::vector<float>& w,
                              int m, int n, int k) {
    DeviceArray dx(b, x.size()), dw(b, w.size()), out(b, std::size_t(m) * n);
    b.upload(dx.buf(), x.data(), x.size());
    b.upload(dw.buf(), w.data(), w.size());
    b.fill(out.buf(), NAN);  // a tile nobody wrote stays NaN and fails the bound
    b.matmul(out.buf(), dx.buf(), dw.buf(), m, n, k);
    std::vector<float> h(out.size());
    b.download(h.data(), out.buf(), h.size());
    return h;
}

std::vector<float> run_attention(Backend& b, const std::vector<float>& q,
                                 const std::vector<float>& k_pool, const std::vector<float>& v_pool,
                                 const std::vector<int32_t>& table, const AttentionShape& s) {
    DeviceArray dq(b, q.size()), dk(b, k_pool.size()), dv(b, v_pool.size()), out(b, q.size());
    b.upload(dq.buf(), q.data(), q.size());
    b.upload(dk.buf(), k_pool.data(), k_pool.size());
    b.upload(dv.buf(), v_pool.data(), v_pool.size());
    b.fill(out.buf(), NAN);  // a row nobody wrote stays NaN
    b.attention(out.buf(), dq.buf(), dk.buf(), dv.buf(), table, s);
    std::vector<float> h(out.size());
    b.download(h.data(), out.buf(), h.size());
    return h;
}

// Runs f() with every CPU op capped at one thread (each op then runs as one
// task on the calling thread); the cap is lifted even when f() fails.
template <class F>
auto on_one_thread(const F& f) {
    struct Cap {
        Cap() { set_cpu_thread_cap(1); }
        ~Cap() { set_cpu_thread_cap(0); }
    } cap;
    return f();
}

}  // namespace

TEST_CASE("thread pool: every task runs exactly once, any pool size", "[threads]") {
    for (int threads : {1, 2, 3, 5}) {
        INFO("pool of " << threads << " threads");
        ThreadPool pool(threads);
        REQUIRE(pool.size() == threads);
        check_every_task_once(pool, 3000, 40 + std::uint64_t(threads));
    }
}

TEST_CASE("thread pool: the caller runs a prefix of a job's tasks, the workers the rest",
          "[threads]") {
    // Why it matters: ops that split the same rows the same way then run the
    // same rows on the same core (thread_pool.h). Tasks that take a while,
    // so the workers join in; whoever runs what, the caller's tasks must be
    // 0..a-1 and the workers' a..n-1.
    for (int threads : {2, 3}) {
        ThreadPool pool(threads);
        int jobs_shared = 0;  // jobs in which a worker ran a task at all
        for (int n : {2, 5, 8, 33, 64}) {
            for (int rep = 0; rep < 20; ++rep) {
                INFO(threads << " threads, " << n << " tasks, job " << rep);
                std::vector<std::atomic<int>> on_caller(static_cast<std::size_t>(n));
                const auto caller = std::this_thread::get_id();
                pool.run(n, [&](int i) {
                    std::this_thread::sleep_for(std::chrono::microseconds(50));
                    on_caller[std::size_t(i)].store(std::this_thread::get_id() == caller ? 1 : 2);
                });
                int cut = 0;
                while (cut < n && on_caller[std::size_t(cut)].load() == 1) ++cut;
                for (int i = cut; i < n; ++i) REQUIRE(on_caller[std::size_t(i)].load() == 2);
                if (cut < n) ++jobs_shared;
            }
        }
        // The property says nothing if the workers never ran a task.
        REQUIRE(jobs_shared > 0);
    }
    // A job too large for the two-ended count (thread_pool.cpp) is claimed
    // from the front by every thread: still each task exactly once.
    ThreadPool pool(3);
    const int n = 40000;
    std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
    pool.run(n, [&](int i) { hits[std::size_t(i)].fetch_add(1); });
    int wrong = 0;
    for (const auto& h : hits) wrong += h.load() != 1;
    REQUIRE(wrong == 0);
}

TEST_CASE("thread pool: nested and concurrent run() calls run inline, never deadlock",
          "[threads]") {
    ThreadPool pool(3);
    std::atomic<int> inner{0};
    pool.run(8, [&](int) { pool.run(5, [&](int) { inner.fetch_add(1); }); });
    REQUIRE(inner.load() == 40);
    // Two callers at once: one gets the pool, the other runs its tasks itself.
    std::atomic<long> sum_a{0}, sum_b{0};
    std::thread other([&] {
        for (int j = 0; j < 500; ++j) pool.run(20, [&](int i) { sum_b.fetch_add(i); });
    });
    for (int j = 0; j < 500; ++j) pool.run(20, [&](int i) { sum_a.fetch_add(i); });
    other.join();
    REQUIRE(sum_a.load() == 500L * 190);
    REQUIRE(sum_b.load() == 500L * 190);
}

TEST_CASE("cpu threads: the engine picks them from the work", "[threads]") {
    const int cpus = cpu_threads();
    REQUIRE(cpus >= 1);
    REQUIRE(cpus == ThreadPool::available_cpus());
    REQUIRE(cpu_threads_for(0) == 1);
    REQUIRE(cpu_threads_for(2 * kMinFlopsPerThread - 1) == 1);
    REQUIRE(cpu_threads_for(2 * kMinFlopsPerThread) == std::min(2, cpus));
    REQUIRE(cpu_threads_for(1e15) == cpus);
    // The 29-token prompt of the stories15M shape: its largest op, the MLP's
    // 2·T·D·F, stays on one thread (issue 12).
    REQUIRE(cpu_threads_for(2.0 * 29 * 288 * 768) == 1);
    set_cpu_thread_cap(1);
    REQUIRE(cpu_threads_for(1e15) == 1);
    set_cpu_thread_cap(0);
    REQUIRE(cpu_threads_for(1e15) == cpus);
}

TEST_CASE(
    "thread pool: awake() right after a job, not once the workers' spin is over, and light ops "
    "take "
    "the awake threads",
    "[threads]") {
    using namespace std::chrono_literals;
    // Right after a job: retried, since this thread may itself be descheduled
    // for longer than the spin between the job's end and the question.
    const auto awake_after_a_job = [](ThreadPool& pool, const auto& ask) {
        for (int attempt = 0; attempt < 200; ++attempt) {
            pool.run(4, [](int) {});
            if (ask()) return true;
        }
        return false;
    };
    ThreadPool pool(2);
    REQUIRE_FALSE(pool.awake());  // no job yet
    REQUIRE(awake_after_a_job(pool, [&] { return pool.awake(); }));
    std::this_thread::sleep_for(20ms);  // far past the spin: the workers sleep
    REQUIRE_FALSE(pool.awake());
    ThreadPool alone(1);  // no workers to be awake
    alone.run(4, [](int) {});
    REQUIRE_FALSE(alone.awake());

    // cpu_threads_for_light: by the work alone when the pool is asleep, every
    // CPU while it is awake, never past the cap.
    ThreadPool& engine = ThreadPool::engine();
    std::this_thread::sleep_for(20ms);
    REQUIRE(cpu_threads_for_light(0) == 1);
    REQUIRE(cpu_threads_for_light(1e15) == cpu_threads());
    if (cpu_threads() > 1) {
        REQUIRE(
            awake_after_a_job(engine, [] { return cpu_threads_for_light(0) == cpu_threads(); }));
        set_cpu_thread_cap(1);
        engine.run(4, [](int) {});
        REQUIRE(cpu_threads_for_light(0) == 1);
        set_cpu_thread_cap(0);
    }
}

TEST_CASE("plab info says how many threads cpu uses and from which prompt length",
          "[threads][cli]") {
    const auto r = run_cli({"info", "--json"});
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["cpu_threads"] == cpu_threads());
    REQUIRE(j["cpu_min_flops_per_thread"].get<double>() == kMinFlopsPerThread);
    // The first prompt length whose largest per-layer product gets a second
    // thread, recomputed here from the printed config: on cpu, Q/K/V and
    // gate/up are one product each, worth their FLOPs or their weight's bytes.
    const auto& c = j["config"];
    const double d = c["hidden_size"].get<double>();
    const double qd = c["num_attention_heads"].get<double>() * c["head_dim"].get<double>();
    const double kvd = c["num_key_value_heads"].get<double>() * c["head_dim"].get<double>();
    const double widest = std::max({c["intermediate_size"].get<double>(), d, qd});
    const double fused = std::max(2.0 * c["intermediate_size"].get<double>(), qd + 2 * kvd);
    const int from = j["cpu_threaded_prefill_from_tokens"];
    if (cpu_threads() > 1) {
        REQUIRE(from > 1);
        REQUIRE(cpu_threads_for(product_work(from, fused, d)) > 1);
        REQUIRE(cpu_threads_for(product_work(from - 1, fused, d)) == 1);
    }
    // cpu-ref: the same rule, its FLOPs weighted by its measured cost factor.
    REQUIRE(j["cpu_ref_flop_cost"]["matmul"].get<double>() == kRefMatmulFlopCost);
    REQUIRE(j["cpu_ref_flop_cost"]["attention"].get<double>() == kRefAttentionFlopCost);
    const int ref_from = j["cpu_ref_threaded_prefill_from_tokens"];
    if (cpu_threads() > 1) {
        REQUIRE(ref_from >= 1);
        REQUIRE(ref_from < from);  // the slower reference splits sooner
        REQUIRE(cpu_threads_for(kRefMatmulFlopCost * 2.0 * ref_from * d * widest) > 1);
        if (ref_from > 1)
            REQUIRE(cpu_threads_for(kRefMatmulFlopCost * 2.0 * (ref_from - 1) * d * widest) == 1);
    }
    const auto text = run_cli({"info"});
    REQUIRE(text.out.find("Threads of the cpu backend: up to " + std::to_string(cpu_threads())) !=
            std::string::npos);
    REQUIRE(text.out.find("cpu-ref follows the same rule") != std::string::npos);
}

TEST_CASE("cpu matmul on many threads matches cpu-ref, awkward sizes", "[threads]") {
    auto fast = make_backend("cpu");
    auto ref = make_backend("cpu-ref");
    struct Shape {
        int m, n, k;
    };
    // Each above 2·kMinFlopsPerThread, so on 2+ CPUs it really splits: m = 1
    // and 5 (decode: w rows only), 2..4 (the few-row dot-product path of a
    // batched decode step), 37 (one row tile), 300 (two row tiles of kRowTile
    // 256, uneven); n not a multiple of the 16-wide tiles.
    for (const Shape s :
         {Shape{1, 20011, 401}, Shape{2, 20011, 401}, Shape{3, 9001, 403}, Shape{4, 5011, 401},
          Shape{5, 1501, 1201}, Shape{37, 613, 353}, Shape{300, 517, 131}}) {
        INFO("m=" << s.m << " n=" << s.n << " k=" << s.k << ", threads "
                  << cpu_threads_for(2.0 * s.m * s.n * s.k));
        REQUIRE(2.0 * s.m * s.n * s.k >= 2 * kMinFlopsPerThread);
        const auto x = random_floats(std::size_t(s.m) * s.k, 70 + s.m, -1.0f, 1.0f);
        const auto w = random_floats(std::size_t(s.n) * s.k, 71 + s.n, -1.0f, 1.0f);
        const auto want = run_matmul(*ref, x, w, s.m, s.n, s.k);
        require_not_all_zero(want, "cpu-ref matmul");
        const auto got = run_matmul(*fast, x, w, s.m, s.n, s.k);
        require_within_sum_bound(got, want, x, w, s.m, s.n, s.k);
        // Which thread takes which tile changes from run to run; the result must not.
        require_bitwise_equal(run_matmul(*fast, x, w, s.m, s.n, s.k), got, "a second threaded run");
    }
}

TEST_CASE("cpu attention and swiglu on many threads match cpu-ref", "[threads]") {
    auto fast = make_backend("cpu");
    auto ref = make_backend("cpu-ref");
    // Attention: 100 queries (4 tiles of 32, the last one short) after 123
    // cached positions, 7 query heads sharing 1 K/V head, Dh 40, blocks of 16
    // in shuffled order: 4·Dh·H·pairs ≈ 19 MFLOP, above the 2-thread threshold.
    const AttentionShape s = attention_shape(100, 123, 7, 1, 40, 16);
    const int n_keys = s.n_keys();
    const int n_blocks = (n_keys + s.block_size - 1) / s.block_size;
    std::vector<int32_t> table(static_cast<std::size_t>(n_blocks));
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937_64(5));
    const int row = s.n_kv_heads * s.head_dim;
    const auto k_pool = random_floats(std::size_t(n_blocks) * s.block_size * row, 80, -2, 2);
    const auto v_pool = random_floats(k_pool.size(), 81);
    const auto q = random_floats(std::size_t(s.n_queries) * s.n_heads * s.head_dim, 82, -2, 2);
    const double pairs = double(s.n_queries) * s.pos0 + 0.5 * s.n_queries * (s.n_queries + 1);
    REQUIRE(4.0 * s.head_dim * s.n_heads * pairs >= 2 * kMinFlopsPerThread);
    const auto attention = [&](Backend& b) {
        DeviceArray dq(b, q.size()), dk(b, k_pool.size()), dv(b, v_pool.size()), out(b, q.size());
        b.upload(dq.buf(), q.data(), q.size());
        b.upload(dk.buf(), k_pool.data(), k_pool.size());
        b.upload(dv.buf(), v_pool.data(), v_pool.size());
        b.fill(out.buf(), NAN);
        b.attention(out.buf(), dq.buf(), dk.buf(), dv.buf(), table, s);
        std::vector<float> h(out.size());
        b.download(h.data(), out.buf(), h.size());
        return h;
    };
    const auto want = attention(*ref);
    require_not_all_zero(want, "cpu-ref attention");
    require_allclose(attention(*fast), want, 1e-6, 1e-5,
                     "GEMM blocking and the library expf instead of strict_expf: a few ulp on "
                     "outputs of size ~1 (cpu's stated tolerance)");

    // SwiGLU: 24 FLOPs a value counted, so 700,001 values split on 2+ CPUs.
    const std::size_t n = 700001;
    const auto gate = random_floats(n, 83, -4, 4), up = random_floats(n, 84);
    const auto swiglu = [&](Backend& b) {
        DeviceArray dg(b, n), du(b, n), out(b, n);
        b.upload(dg.buf(), gate.data(), n);
        b.upload(du.buf(), up.data(), n);
        b.fill(out.buf(), NAN);
        b.swiglu(out.buf(), dg.buf(), du.buf(), n);
        std::vector<float> h(n);
        b.download(h.data(), out.buf(), n);
        return h;
    };
    const auto want_s = swiglu(*ref);
    require_allclose(swiglu(*fast), want_s, 1e-6, 1e-5,
                     "Eigen's vectorised exp against strict_expf: a few ulp");
}

TEST_CASE("plab bench --load reports quiet, single-thread and loaded rows", "[threads][cli]") {
    const auto r = run_cli({"bench", "--backends", "cpu", "--lengths", "8,29", "--repeats", "3",
                            "--decode-steps", "2", "--load", "--peak-size", "256", "--json"});
    INFO("stderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["cpu_threads"].get<int>() >= 1);
    REQUIRE(j["min_flops_per_thread"].get<double>() == kMinFlopsPerThread);
    REQUIRE(j["load"]["cpu"].get<int>() >= 0);
    for (const char* table : {"prefill", "prefill_single_thread", "prefill_load"}) {
        INFO(table);
        REQUIRE(j[table].size() == 2);
        for (std::size_t i = 0; i < 2; ++i) {
            const auto& row = j[table][i];
            REQUIRE(row["backend"] == "cpu");
            REQUIRE(row["tokens"] == (i == 0 ? 8 : 29));
            REQUIRE(row["runs"] == 3);
            REQUIRE(row["median_s"].get<double>() > 0);
            REQUIRE(row["worst_s"].get<double>() >= row["median_s"].get<double>());
            REQUIRE(row["tokens_per_s"].get<double>() > 0);
        }
    }
    for (const auto& row : j["prefill_load"]) {
        REQUIRE(row["ratio_to_quiet"].get<double>() > 0);
        REQUIRE(row["ratio_to_quiet_single_thread"].get<double>() > 0);
        // The ratio is the two medians' quotient, not a number of its own.
        const auto& quiet = j["prefill"][row["tokens"] == 8 ? 0 : 1];
        REQUIRE(row["ratio_to_quiet"].get<double>() ==
                Approx(row["median_s"].get<double>() / quiet["median_s"].get<double>()));
    }
    REQUIRE(j["decode_load"].size() == 1);
    REQUIRE(j["decode_load"][0]["ratio_to_quiet"].get<double>() > 0);

    // The text form: the new columns and sections, and no load section without --load.
    // cpu-ref too: its thread count is the engine's choice as well, so it
    // gets a single-thread row.
    const auto t = run_cli({"bench", "--backends", "cpu,cpu-ref", "--lengths", "8", "--repeats",
                            "2", "--decode-steps", "2", "--load", "--peak-size", "256"});
    REQUIRE(t.exit_code == 0);
    const auto quiet_one = t.out.find("Quiet, capped at 1 thread");
    const auto loaded = t.out.find("Under load: one other process spinning on CPU");
    REQUIRE(quiet_one != std::string::npos);
    REQUIRE(loaded != std::string::npos);
    const std::string one_thread = t.out.substr(quiet_one, loaded - quiet_one);
    INFO(one_thread);
    REQUIRE(one_thread.find("cpu-ref ") != std::string::npos);
    REQUIRE(t.out.find("worst ms") != std::string::npos);
    REQUIRE(t.out.find("Under load: one other process spinning on CPU") != std::string::npos);
    REQUIRE(t.out.find("median / quiet 1-thr") != std::string::npos);
}

// cpu-ref's promise (issue 12): the thread count never changes a bit, because
// its threads split outputs, never a sum. Each op runs capped at one thread
// (one task, on the caller) and uncapped twice (4 tasks per thread on the
// pool, claimed first come first served, so which thread computes which
// output changes from run to run). Every op is above the split threshold by
// the engine's rule with cpu-ref's cost factors (asserted); the matmuls are
// even by their raw FLOPs.
TEST_CASE("cpu-ref on 1 thread and on many: bitwise equal, matmul, attention and a whole prefill",
          "[threads][reference]") {
    if (cpu_threads() < 2) {
        // One CPU here (or PLAB_CPU_THREADS=1): this process has no second thread to split
        // an op over, so the same promise is checked across processes, a whole prefill
        // and decode planned for 1 and for 4 CPUs (more threads than cores run, only
        // slower). Its 16-token prompt is past cpu-ref's split threshold on the shipped
        // model (plab info: 6 tokens).
        const std::filesystem::path prompts = process_temp_dir("threads_one_cpu") / "p.txt";
        write_bytes(prompts, "Once upon a time there was a little girl named Lily who liked\n");
        auto digest = [&](const std::string& env) {
            const CliResult r =
                run_cli_env(env, {"generate", "--prompts", prompts.string(), "--backend", "cpu-ref",
                                  "-n", "4", "--no-stop", "--logits-digest", "--json"});
            INFO(r.err);
            REQUIRE(r.exit_code == 0);
            return nlohmann::json::parse(r.out)["requests"][0]["logits_sha256"].get<std::string>();
        };
        CHECK(digest("PLAB_CPU_THREADS=1") == digest("PLAB_CPU_THREADS=4"));
        return;
    }
    auto ref = make_backend("cpu-ref");

    SECTION("matmul: decode-like, few outputs, uneven rows") {
        struct Shape {
            int m, n, k;
        };
        // 1 x 20011: one row, split over w's rows; 1 x 3: fewer outputs than
        // tasks; 37 and 300 rows: ranges that cut rows in the middle.
        for (const Shape s : {Shape{1, 20011, 401}, Shape{1, 3, 2700001}, Shape{37, 613, 353},
                              Shape{300, 517, 131}}) {
            const double flops = 2.0 * s.m * s.n * s.k;
            INFO("m=" << s.m << " n=" << s.n << " k=" << s.k << ", threads "
                      << cpu_threads_for(kRefMatmulFlopCost * flops));
            REQUIRE(flops >= 2 * kMinFlopsPerThread);
            REQUIRE(cpu_threads_for(kRefMatmulFlopCost * flops) == cpu_threads());
            const auto x = random_floats(std::size_t(s.m) * s.k, 90 + s.m, -1.0f, 1.0f);
            const auto w = random_floats(std::size_t(s.n) * s.k, 91 + s.n, -1.0f, 1.0f);
            const auto one = on_one_thread([&] { return run_matmul(*ref, x, w, s.m, s.n, s.k); });
            require_not_all_zero(one, "cpu-ref matmul on 1 thread");
            require_bitwise_equal(run_matmul(*ref, x, w, s.m, s.n, s.k), one, "matmul, threaded");
            require_bitwise_equal(run_matmul(*ref, x, w, s.m, s.n, s.k), one,
                                  "matmul, threaded again");
        }
    }

    SECTION("attention: a chunk after cached positions, and 3 queries over 900 keys") {
        // 7 query heads sharing 1 K/V head (GQA), Dh 40, blocks of 16 in
        // shuffled order; (100, 123): 700 rows of uneven causal length;
        // (3, 900): 21 rows, each long.
        for (const auto& [n_queries, pos0] : {std::pair{100, 123}, std::pair{3, 900}}) {
            const AttentionShape s = attention_shape(n_queries, pos0, 7, 1, 40, 16);
            const int n_blocks = (s.n_keys() + s.block_size - 1) / s.block_size;
            std::vector<int32_t> table(static_cast<std::size_t>(n_blocks));
            std::iota(table.begin(), table.end(), 0);
            std::shuffle(table.begin(), table.end(), std::mt19937_64(6));
            const int row = s.n_kv_heads * s.head_dim;
            const auto k_pool =
                random_floats(std::size_t(n_blocks) * s.block_size * row, 92, -2, 2);
            const auto v_pool = random_floats(k_pool.size(), 93);
            const auto q =
                random_floats(std::size_t(s.n_queries) * s.n_heads * s.head_dim, 94, -2, 2);
            const double pairs = double(n_queries) * pos0 + 0.5 * n_queries * (n_queries + 1.0);
            const double flops = 4.0 * s.head_dim * s.n_heads * pairs;
            INFO(n_queries << " queries after " << pos0 << ", threads "
                           << cpu_threads_for(kRefAttentionFlopCost * flops));
            REQUIRE(cpu_threads_for(kRefAttentionFlopCost * flops) == cpu_threads());
            const auto one =
                on_one_thread([&] { return run_attention(*ref, q, k_pool, v_pool, table, s); });
            require_not_all_zero(one, "cpu-ref attention on 1 thread");
            require_bitwise_equal(run_attention(*ref, q, k_pool, v_pool, table, s), one,
                                  "attention, threaded");
            require_bitwise_equal(run_attention(*ref, q, k_pool, v_pool, table, s), one,
                                  "attention, threaded again");
        }
    }

    SECTION("a whole prefill, and a chunked one, of a seeded random model") {
        // D 128, 4 query heads and 2 K/V heads of 32, F 384: the shipped
        // model's shape, 2 layers. 101 tokens whole on 1 thread, then whole
        // and in chunks of 37 + 64 on many.
        const ModelConfig c = small_config(128, 2, 4, 2, 32, 384, 512, 128);
        const Weights w = make_random_weights(c, 31);
        const auto tokens = random_tokens(101, c.vocab_size, 32);
        // The smallest ops of the run, the 37-token chunk's K projection
        // (37 x 64 x 128) and its attention, still get more than one thread.
        REQUIRE(cpu_threads_for(kRefMatmulFlopCost * 2.0 * 37 * 64 * 128) > 1);
        REQUIRE(cpu_threads_for(kRefAttentionFlopCost * 4.0 * 32 * 4 * (0.5 * 37 * 38)) > 1);
        const DeviceModel model(*ref, w);
        struct Run {
            std::vector<float> logits;             // (T, V)
            std::vector<std::vector<float>> k, v;  // per layer, the cache as read back
        };
        const auto prefill = [&](const ChunkPlan& plan) {
            Session session(model);
            ForwardProbes every_position;
            every_position.all_logits = true;
            Run r;
            r.logits = session.prefill(tokens, plan, every_position).all_logits;
            for (int l = 0; l < c.n_layers; ++l) {
                r.k.push_back(session.read_kv(l, KvPart::K));
                r.v.push_back(session.read_kv(l, KvPart::V));
            }
            return r;
        };
        const Run one = on_one_thread([&] { return prefill(ChunkPlan{{101}}); });
        REQUIRE(one.logits.size() == std::size_t(101) * c.vocab_size);
        require_not_all_zero(one.logits, "cpu-ref logits on 1 thread");
        for (const ChunkPlan& plan : {ChunkPlan{{101}}, ChunkPlan{{37, 64}}}) {
            const Run many = prefill(plan);
            const std::string how =
                plan.lengths.size() == 1 ? "whole, threaded" : "37+64, threaded";
            require_bitwise_equal(many.logits, one.logits, "logits of every position, " + how);
            for (int l = 0; l < c.n_layers; ++l) {
                require_bitwise_equal(many.k[std::size_t(l)], one.k[std::size_t(l)],
                                      "K of layer " + std::to_string(l) + ", " + how);
                require_bitwise_equal(many.v[std::size_t(l)], one.v[std::size_t(l)],
                                      "V of layer " + std::to_string(l) + ", " + how);
            }
        }
    }
}
