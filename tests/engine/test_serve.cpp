// Workload replay (issue 11): `plab serve` and serving/serve.h. The virtual
// clock makes a replay deterministic, so latency relations between policies
// can be asserted without flakiness; outputs are the engine's, so they must be
// those of each request alone on the reference backend.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "model/model_io.h"
#include "runtime/cost_model.h"
#include "runtime/generate.h"
#include "runtime/registry.h"
#include "serving/serve.h"
#include "serving/step_cost.h"
#include "test_util.h"

namespace plab::test {
namespace {

const std::string& serve_model_dir() {
    static const CliRandomModel model("plab_serve_model", 5);
    return model.dir;
}

std::string write_file(const std::string& name, const std::string& text) {
    const auto path = process_temp_dir("plab_serve") / name;
    std::ofstream(path) << text;
    return path.string();
}

// A Chrome trace file's events, grouped by the name of their track.
std::map<std::string, std::vector<nlohmann::json>> events_by_track(const std::string& path) {
    std::ifstream f(path);
    const auto j = nlohmann::json::parse(f);
    std::map<int, std::string> tracks;
    for (const auto& e : j["traceEvents"])
        if (e["ph"] == "M") tracks[e["tid"].get<int>()] = e["args"]["name"];
    std::map<std::string, std::vector<nlohmann::json>> by_track;
    for (const auto& e : j["traceEvents"])
        if (e["ph"] != "M") by_track[tracks.at(e["tid"].get<int>())].push_back(e);
    return by_track;
}

}  // namespace

TEST_CASE("StepCost charges the classifier only to a span that samples", "[serve]") {
    // A prompt of 10 tokens in chunks 6, 4: the first chunk's logits are never
    // read (the engine skips its classifier row), the last chunk's are.
    const ModelConfig c = load_model(serve_model_dir()).weights.config;
    Request r{SamplerOptions{}};
    r.tokens.assign(10, 1);
    const StepCost cost{0, 0, 1};  // 1 GFLOP/s: microseconds = kFLOP
    auto charged = [&](int length, int n) {
        r.seq.length = length;  // positions reserved for this step included
        Schedule s;
        s.spans.push_back({&r, n, {}, false});
        return cost.duration_us(c, s) * 1e3;  // FLOPs
    };
    const PrefillCost first = prefill_cost(c, 6, 0), last = prefill_cost(c, 4, 6);
    REQUIRE(charged(6, 6) == Approx(first.projection_flops + first.attention_flops));
    REQUIRE(charged(10, 4) == Approx(last.total()));
}

TEST_CASE("serve: every policy gives each request the tokens it gets alone", "[serve]") {
    const Model model = load_model(serve_model_dir());
    WorkloadGenerator g;
    g.rate = 20000;  // arrivals faster than the steps: requests overlap
    g.requests = 6;
    g.seed = 3;
    g.prompt_min = 4;
    g.prompt_max = 40;
    g.new_min = 2;
    g.new_max = 10;
    const Workload w = generate_workload(g);
    auto be = make_backend("cpu-ref");
    const DeviceModel dm(*be, model.weights);
    std::vector<std::vector<int32_t>> alone;
    for (Policy p :
         {Policy::one_at_a_time, Policy::static_batch, Policy::continuous, Policy::chunked}) {
        INFO("policy " << policy_name(p));
        ServeOptions o;
        o.engine.backend = "cpu-ref";
        o.engine.block_size = 4;
        o.engine.policy = p;
        o.engine.max_step_tokens = p == Policy::chunked ? 16 : model.weights.config.max_seq_len;
        const ServeReport r = serve(model, w, o);
        REQUIRE(r.requests.size() == w.requests.size());
        bool overlapped = false;
        for (const StepRecord& s : r.steps) overlapped |= s.requests.size() > 1;
        REQUIRE(overlapped == (p != Policy::one_at_a_time));
        for (std::size_t i = 0; i < r.requests.size(); ++i) {
            const ServedRequest& s = r.requests[i];
            REQUIRE(static_cast<int>(s.new_tokens.size()) == w.requests[i].max_new_tokens);
            if (alone.size() <= i) {  // the oracle: one Session, runtime/generate.h
                GenerateOptions go;
                go.max_new_tokens = w.requests[i].max_new_tokens;
                go.stop_at_eos = false;
                Trace trace;
                alone.push_back(
                    generate(dm, *model.tokenizer, "", s.prompt_ids, go, trace).new_tokens);
            }
            INFO("request " << i);
            REQUIRE(s.new_tokens == alone[i]);
        }
    }
}

TEST_CASE("serve: the virtual clock gives byte-identical JSON for the same workload and seed",
          "[serve]") {
    const std::vector<std::string> args = {"serve",
                                           "--model",
                                           serve_model_dir(),
                                           "--rate",
                                           "100",
                                           "--requests",
                                           "8",
                                           "--seed",
                                           "4",
                                           "--prompt-len",
                                           "4,60",
                                           "--new-tokens",
                                           "2,12",
                                           "--token-budget",
                                           "24",
                                           "--json"};
    const CliResult a = run_cli(args), b = run_cli(args);
    REQUIRE(a.exit_code == 0);
    REQUIRE(a.out == b.out);
    const auto j = nlohmann::json::parse(a.out);
    REQUIRE(j["policy"] == "chunked");
    REQUIRE(j["requests"].size() == 8);
    for (const char* k : {"ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"}) {
        INFO(k);
        for (const char* p : {"p50", "p90", "p99"}) REQUIRE(j["summary"][k][p].is_number());
        REQUIRE(j["summary"][k]["p50"] <= j["summary"][k]["p99"]);
    }
    REQUIRE(j["summary"]["output_tokens_per_s"].get<double>() > 0);
    REQUIRE(j["summary"]["goodput"].is_number());
    // Another seed, another workload.
    std::vector<std::string> other = args;
    other[8] = "5";
    REQUIRE(run_cli(other).out != a.out);
}

TEST_CASE("serve: chunked prefill keeps a long prompt from stalling the others' decoding",
          "[serve]") {
    // Four requests decode; a long prompt arrives. Without chunking its whole
    // prefill shares one step with their decode tokens, and their next token
    // waits for it: one long inter-token gap. With a budget of 16 tokens the
    // prompt is spread over many steps beside them.
    const CliResult r = run_cli({"serve", "--model", serve_model_dir(), "--long-prompt", "120",
                                 "--token-budget", "16", "--compare-policies", "--json"});
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out)["policies"];
    const double chunked = j["chunked"]["itl_ms"]["p99"],
                 continuous = j["continuous"]["itl_ms"]["p99"];
    INFO("p99 ITL chunked " << chunked << " ms, continuous " << continuous << " ms");
    REQUIRE(chunked < continuous);
    // One entry per row of the policy table, no other.
    REQUIRE(j.size() == std::size(kPolicies));
    for (const PolicyRow& p : kPolicies) REQUIRE(j[p.name]["goodput"].is_number());
    // The help names every policy too.
    const std::string help = run_cli({"serve", "--help"}).out;
    CHECK(help.find(policy_names()) != std::string::npos);
}

TEST_CASE("serve --trace: a track per request, spans in order, steps within the budget",
          "[serve]") {
    const std::string path = (process_temp_dir("plab_serve") / "serve_trace.json").string();
    const CliResult r = run_cli({"serve", "--model", serve_model_dir(), "--rate", "2000",
                                 "--requests", "5", "--token-budget", "16", "--trace", path});
    REQUIRE(r.exit_code == 0);
    auto by_track = events_by_track(path);
    REQUIRE(by_track.count("engine steps") == 1);
    for (const auto& step : by_track["engine steps"]) {
        const int tokens = std::stoi(step["args"]["prefill_tokens"].get<std::string>()) +
                           std::stoi(step["args"]["decode_tokens"].get<std::string>());
        REQUIRE(tokens >= 1);
        REQUIRE(tokens <= 16);
    }
    for (int id = 0; id < 5; ++id) {
        const std::string name = "request " + std::to_string(id);
        INFO(name);
        REQUIRE(by_track.count(name) == 1);
        double queued_end = -1, first_token = -1, finish = -1, last_step_end = 0;
        for (const auto& e : by_track[name])
            if (e["name"] == "queued") queued_end = e["ts"].get<double>() + e.value("dur", 0.0);
        REQUIRE(queued_end >= 0);
        for (const auto& e : by_track[name]) {
            const double ts = e["ts"], dur = e.value("dur", 0.0);
            if (e["name"] == "first token") first_token = ts;
            if (e["name"] == "finish") finish = ts;
            if (e["name"] == "prefill chunk" || e["name"] == "decode") {
                REQUIRE(ts >= queued_end - 1e-6);  // no step before it left the queue
                last_step_end = std::max(last_step_end, ts + dur);
            }
        }
        REQUIRE(first_token >= queued_end);
        REQUIRE(finish >= first_token);
        REQUIRE(std::abs(finish - last_step_end) < 1e-3);  // its last token ends its last step
    }
}

TEST_CASE("serve --trace --network-delay-ms: each token's delivery overlaps the next step",
          "[serve]") {
    // Issue 11, item 5: stages that overlap are drawn overlapping. A token is
    // on the wire to the client while the engine already computes the next
    // step, so its delivery span must start where it was sampled and overlap
    // the following engine step, not follow it.
    auto trace_of = [](const std::string& delay) {
        const std::string path =
            (process_temp_dir("plab_serve") / ("serve_delivery_" + delay + ".json")).string();
        const CliResult r =
            run_cli({"serve", "--model", serve_model_dir(), "--rate", "2000", "--requests", "4",
                     "--token-budget", "16", "--network-delay-ms", delay, "--trace", path});
        REQUIRE(r.exit_code == 0);
        return events_by_track(path);
    };
    auto by_track = trace_of("5");
    const auto& steps = by_track.at("engine steps");
    int overlapping = 0;
    for (int id = 0; id < 4; ++id) {
        const std::string name = "request " + std::to_string(id);
        INFO(name);
        REQUIRE(by_track.count(name + " delivery") == 1);
        std::vector<double> sampled;  // the end of each step that made one of its tokens
        for (const auto& e : by_track[name])
            if (e["name"] == "prefill chunk" || e["name"] == "decode") {
                const double end = e["ts"].get<double>() + e["dur"].get<double>();
                sampled.push_back(end);
            }
        const auto& deliveries = by_track[name + " delivery"];
        REQUIRE(!deliveries.empty());
        REQUIRE(deliveries.front()["name"] == "first token delivered");
        for (const auto& d : deliveries) {
            const double ts = d["ts"], dur = d["dur"];
            REQUIRE(std::abs(dur - 5000.0) < 1e-6);  // the delay, in us
            // It starts when a step of its request ended (the token was sampled).
            bool at_a_step_end = false;
            for (double end : sampled) at_a_step_end = at_a_step_end || std::abs(end - ts) < 1e-3;
            REQUIRE(at_a_step_end);
            // The engine's next step starts as the token is sampled and runs
            // while the token is still on its way: the spans overlap.
            for (const auto& s : steps) {
                const double s_ts = s["ts"], s_end = s_ts + s["dur"].get<double>();
                if (s_ts < ts - 1e-3) continue;  // an earlier step
                REQUIRE(s_ts < ts + dur);        // starts before the delivery ends ...
                REQUIRE(s_end > ts);             // ... and runs during it
                ++overlapping;
                break;
            }
        }
    }
    REQUIRE(overlapping > 0);
    // No delay: nothing is drawn for delivery (TTFT stops when the token is sampled).
    auto no_delay = trace_of("0");
    for (const auto& [track, events] : no_delay)
        REQUIRE(track.find("delivery") == std::string::npos);
}

TEST_CASE("serve --disaggregate: the colocated outputs, and the bytes of the blocks handed over",
          "[serve]") {
    const Model model = load_model(serve_model_dir());
    WorkloadGenerator g;
    g.rate = 3000;
    g.requests = 6;
    g.seed = 9;
    g.prompt_min = 3;
    g.prompt_max = 45;
    g.new_min = 1;  // a one-token request never leaves the prefill engine
    g.new_max = 3;
    const Workload w = generate_workload(g);
    ServeOptions o;
    o.engine.backend = "cpu-ref";
    o.engine.block_size = 4;
    o.engine.max_step_tokens = 16;
    const ServeReport colocated = serve(model, w, o);
    o.disaggregate = true;
    o.link_gb_per_s = 2;
    const ServeReport split = serve(model, w, o);
    const ModelConfig& c = model.weights.config;
    const long long bytes_per_block =
        4LL * 2 * c.n_layers * c.n_kv_heads * c.head_dim * static_cast<long long>(sizeof(float));
    long long blocks = 0, one_token = 0;
    for (std::size_t i = 0; i < w.requests.size(); ++i) {
        INFO("request " << i);
        const ServedRequest& a = colocated.requests[i];
        const ServedRequest& b = split.requests[i];
        REQUIRE(b.new_tokens == a.new_tokens);  // the reference backend: the same tokens
        REQUIRE(static_cast<int>(b.new_tokens.size()) == w.requests[i].max_new_tokens);
        const long long nb = w.requests[i].max_new_tokens > 1 ? (b.prompt_tokens + 3) / 4 : 0;
        one_token += nb == 0 ? 1 : 0;
        blocks += nb;
        REQUIRE(b.kv_transfer_bytes == nb * bytes_per_block);
        // The transfer's modelled time at 2 GB/s sits in its first inter-token gap.
        REQUIRE(b.kv_transfer_ms == Approx(nb * bytes_per_block / 2e9 * 1e3));
        if (nb > 0) REQUIRE(b.itl_ms[0] >= b.kv_transfer_ms);
    }
    REQUIRE(one_token > 0);
    REQUIRE(blocks > 0);
    REQUIRE(split.summary.kv_transfer_blocks == blocks);
    REQUIRE(split.summary.kv_transfer_bytes == blocks * bytes_per_block);
    o.virtual_clock = false;
    require_error([&] { serve(model, w, o); }, "only the virtual clock times them as two devices");
}

TEST_CASE("serve --calibrate measures a step cost that --step-cost takes back", "[serve]") {
    const CliResult r = run_cli({"serve", "--model", serve_model_dir(), "--calibrate", "--json"});
    if (r.exit_code != 0) {
        // The one refusal it may give on a loaded machine, said in one line.
        require_one_line_cli_error(r, "the machine is too noisy, run again");
        return;
    }
    const auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["gflops"].get<double>() > 0);
    REQUIRE(j["step_us"].get<double>() >= 0);
    REQUIRE(j["per_sequence_us"].get<double>() >= 0);
    const CliResult replay = run_cli({"serve", "--model", serve_model_dir(), "--requests", "3",
                                      "--step-cost", j["step_cost"].get<std::string>(), "--json"});
    REQUIRE(replay.exit_code == 0);
    REQUIRE(nlohmann::json::parse(replay.out)["requests"].size() == 3);
}

TEST_CASE("workload files: Windows line endings, a byte order mark and blank lines are read",
          "[serve]") {
    // The same file as an editor on Windows would save it: BOM, CRLF, a blank
    // separator line. Line numbers count as the editor does.
    const Workload w = parse_workload(
        "\xEF\xBB\xBF{\"arrival_s\": 0, \"prompt_tokens\": 5}\r\n\r\n"
        "{\"arrival_s\": 0.5, \"prompt\": \"Once\", \"max_new_tokens\": 3}\r\n",
        "w.jsonl");
    REQUIRE(w.requests.size() == 2);
    REQUIRE(w.requests[0].line == 1);
    REQUIRE(w.requests[0].prompt_tokens == 5);
    REQUIRE(w.requests[1].line == 3);
    REQUIRE(w.requests[1].prompt == "Once");  // no '\r' left in the text
    REQUIRE(w.requests[1].max_new_tokens == 3);
    require_error([] { parse_workload("{\"arrival_s\": 0, \"prompt_tokens\": 5}\r\n{\"arr", "w"); },
                  "w line 2: malformed JSON at column");
}

TEST_CASE("serve: bad workloads and options, one line naming the line and the problem", "[serve]") {
    const std::string m = serve_model_dir();
    auto serve_file = [&](const std::string& name, const std::string& text) {
        return run_cli({"serve", "--model", m, "--workload", write_file(name, text)});
    };
    require_one_line_cli_error(
        serve_file("unsorted.jsonl",
                   "{\"arrival_s\": 0.5, \"prompt_tokens\": 4}\n"
                   "{\"arrival_s\": 0.1, \"prompt_tokens\": 4}\n"),
        "line 2: arrival_s 0.1 is before line 1's 0.5; sort the lines by arrival");
    require_one_line_cli_error(
        serve_file("negative.jsonl", "{\"arrival_s\": 0, \"prompt_tokens\": -3}\n"),
        "line 1: prompt_tokens -3 must be a whole number between 1 and 1048576");
    require_one_line_cli_error(
        serve_file("new.jsonl",
                   "{\"arrival_s\": 0, \"prompt\": \"hi\"}\n\n"
                   "{\"arrival_s\": 1, \"prompt\": \"hi\", \"max_new_tokens\": 0}\n"),
        "line 3: max_new_tokens 0 must be a whole number between 1 and 1048576");
    require_one_line_cli_error(serve_file("long.jsonl",
                                          "{\"arrival_s\": 0, \"prompt_tokens\": "
                                          "100000}\n"),
                               "line 1: a prompt of 100000 tokens is longer than the model's "
                               "max_seq_len");
    require_one_line_cli_error(
        serve_file("malformed.jsonl",
                   "{\"arrival_s\": 0, \"prompt\": \"a\"}\n{\"arrival_s\": 1,\n"),
        "line 2: malformed JSON at column 17");
    // A typo in a key is refused, not ignored (it would silently drop the
    // request's output length).
    require_one_line_cli_error(
        serve_file("typo.jsonl", "{\"arrival_s\": 0, \"prompt\": \"a\", \"max_tokens\": 4}\n"),
        "line 1: unknown key \"max_tokens\"; the keys are \"arrival_s\"");
    // Valid JSON grammar, beyond a double (found by the fuzzer: it escaped as a
    // library exception).
    require_one_line_cli_error(serve_file("overflow.jsonl", "{\"arrival_s\": 1e99999}\n"),
                               "line 1: a number too large to read");
    // A file opening with '[' is a ShareGPT array: a number in it is named.
    require_one_line_cli_error(serve_file("array.jsonl", "[0, \"a\", 4]\n"),
                               "conversation 0: a number, not a conversation object");
    // 2^64 - 1 would wrap to -1 if read as a signed number.
    require_one_line_cli_error(
        serve_file("huge.jsonl", "{\"arrival_s\": 0, \"prompt_tokens\": 18446744073709551615}\n"),
        "prompt_tokens 18446744073709551615 must be a whole number between 1 and 1048576");
    require_one_line_cli_error(serve_file("empty.jsonl", "\n\n"), "no request in the workload");
    require_one_line_cli_error(run_cli({"serve", "--model", m, "--rate", "0"}),
                               "request rate 0 must be > 0");
    require_one_line_cli_error(run_cli({"serve", "--model", m, "--prompt-len", "9,3"}),
                               "prompt lengths 9..3 must satisfy 1 <= min <= max");
    require_one_line_cli_error(run_cli({"serve", "--model", m, "--prompt-len", "5"}),
                               "--prompt-len '5' must be MIN,MAX");
    require_one_line_cli_error(run_cli({"serve", "--model", m, "--new-tokens", "0,4"}),
                               "new token counts 0..4 must satisfy 1 <= min <= max");
    require_one_line_cli_error(run_cli({"serve", "--model", m, "--clock", "wall"}),
                               "--clock wall is not a clock; valid: virtual, real");
    require_one_line_cli_error(run_cli({"serve", "--model", m, "--prefix-cache", "maybe"}),
                               "--prefix-cache maybe must be on or off");
    require_one_line_cli_error(run_cli({"serve", "--model", m, "--workload",
                                        write_file("both.jsonl",
                                                   "{\"arrival_s\": 0, "
                                                   "\"prompt_tokens\": 4}\n"),
                                        "--rate", "3"}),
                               "gives each request's arrival_s; drop --rate");
    require_one_line_cli_error(run_cli({"serve", "--model", m, "--policy", "fifo"}),
                               "unknown policy 'fifo'");
    require_one_line_cli_error(run_cli({"serve", "--model", m, "--step-cost", "1,2"}),
                               "is not STEP_US,PER_SEQUENCE_US,GFLOPS");
    require_one_line_cli_error(run_cli({"serve", "--model", m, "--workload", "/nonexistent.jsonl"}),
                               "cannot read workload file /nonexistent.jsonl");
}

}  // namespace plab::test
