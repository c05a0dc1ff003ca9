// `plab generate --prompts FILE`: many requests served together by one Engine,
// checked through the command line on a small random model.
//
// The oracle for every output is the single-prompt path (`plab generate TEXT`,
// a Session of its own, no shared pool, no prefix cache): on cpu-ref the
// engine's batch of four must give each prompt the very tokens it gets alone.
// The oracle for `cached_tokens` is computed here from the prompts' token ids:
// the longest common prefix with an earlier prompt, capped one token short of
// the prompt (its last token is always computed: its logits give the first
// new token) and rounded down to whole blocks (only full blocks are shared).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_util.h"

using namespace plab;
using nlohmann::json;
using test::require_one_line_cli_error;
using test::run_cli;
namespace fs = std::filesystem;

namespace {

std::string small_model() {
    static const test::CliRandomModel model("plab_serving_cli_model", 5);
    return model.dir;
}

std::string write_file(const std::string& name, const std::string& text) {
    const fs::path p = test::process_temp_dir("plab_serving_cli") / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
}

// 80 characters: with the byte tokenizer's BOS, 81 tokens = 10 full blocks of
// 8 and one position more, so a prompt equal to it is a full hit that still
// computes exactly its last token.
const std::string kPrefix =
    "Once upon a time, in a small town by the sea, there lived a girl who loved boats";
const int kBlock = 8;

// The four requests of the file below, in file order (the engine's ids 0..3).
const std::vector<std::string> kPrompts = {kPrefix, kPrefix + " and kites.",
                                           kPrefix + ". One day she", kPrefix};

// Plain text, one prompt a line: a Windows line ending on the first (its '\r'
// is not prompt text) and a blank line (skipped: it is not a request), so the
// engine's ids and the file's lines differ: ids 0,1,2,3 are lines 1,3,4,5.
std::string prompts_file() {
    static const std::string path =
        write_file("shared_prefix.txt", kPrompts[0] + "\r\n\n" + kPrompts[1] + "\n" + kPrompts[2] +
                                            "\n" + kPrompts[3] + "\n");
    return path;
}
const std::vector<int> kLines = {1, 3, 4, 5};

json parse_ok(const test::CliResult& r) {
    INFO("stderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    return json::parse(r.out);
}

std::vector<std::string> common_options() {
    return {"--model", small_model(), "--backend",    "cpu-ref",
            "-n",      "6",           "--block-size", std::to_string(kBlock)};
}

json serve(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"generate", "--prompts", prompts_file(), "--json"};
    for (const auto& a : common_options()) args.push_back(a);
    for (const auto& a : extra) args.push_back(a);
    return parse_ok(run_cli(args));
}

// The oracle: one prompt alone through the single-prompt path, same options.
json alone(const std::string& text, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"generate", "--json"};
    for (const auto& a : common_options()) args.push_back(a);
    for (const auto& a : extra) args.push_back(a);
    args.push_back(text);
    return parse_ok(run_cli(args));
}

const std::vector<json>& alone_runs() {
    static const std::vector<json> runs = [] {
        std::vector<json> v;
        for (const auto& p : kPrompts) v.push_back(alone(p));
        return v;
    }();
    return runs;
}

std::vector<int> ids_of(const json& a) {
    return a.get<std::vector<int>>();
}

// Prompt tokens request i finds cached: full blocks of its longest common
// prefix with an earlier request, never its last token.
int expected_cached(const std::vector<std::vector<int>>& prompts, std::size_t i) {
    int best = 0;
    const auto& p = prompts[i];
    for (std::size_t j = 0; j < i; ++j) {
        const auto& q = prompts[j];
        const auto mismatch = std::mismatch(p.begin(), p.end(), q.begin(), q.end());
        best = std::max(best, static_cast<int>(mismatch.first - p.begin()));
    }
    best = std::min(best, static_cast<int>(p.size()) - 1);
    return best / kBlock * kBlock;
}

// Every request's new tokens, prompt ids and text equal the prompt's run alone.
void require_same_as_alone(const json& served) {
    REQUIRE(served["requests"].size() == kPrompts.size());
    for (std::size_t i = 0; i < kPrompts.size(); ++i) {
        INFO("request " << i << " (line " << kLines[i] << ")");
        const json& r = served["requests"][i];
        const json& a = alone_runs()[i];
        REQUIRE(r["id"] == static_cast<int>(i));
        REQUIRE(r["line"] == kLines[i]);
        REQUIRE(ids_of(r["prompt_ids"]) == ids_of(a["prompt_tokens"]));
        REQUIRE(!r["new_tokens"].empty());
        REQUIRE(ids_of(r["new_tokens"]) == ids_of(a["new_tokens"]));
        REQUIRE(r["text"] == a["text"]);
    }
}

}  // namespace

TEST_CASE(
    "generate --prompts on cpu-ref gives each of 4 prompts sharing a 10-block prefix the tokens "
    "it gets alone, with the prefix cache on and off",
    "[cli][serving]") {
    // The oracle's prompts: BOS + the 80-byte prefix at least, so the shared
    // part really spans several blocks.
    std::vector<std::vector<int>> prompts;
    for (const json& a : alone_runs()) prompts.push_back(ids_of(a["prompt_tokens"]));
    REQUIRE(prompts[0].size() == 81);
    REQUIRE(prompts[1].size() > 81);

    const json on = serve({"--prefix-cache", "on"});
    const json off = serve({"--prefix-cache", "off"});
    require_same_as_alone(on);
    require_same_as_alone(off);
    REQUIRE(on["prefix_cache"] == true);
    REQUIRE(off["prefix_cache"] == false);

    int total_prompt = 0, total_cached = 0;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        INFO("request " << i);
        const int cached = on["requests"][i]["cached_tokens"];
        // Requests 1..3 share the prefix with request 0: 10 blocks of 8. The
        // last one repeats request 0 exactly (81 tokens): 80 cached, 1 computed.
        REQUIRE(cached == expected_cached(prompts, i));
        if (i > 0) REQUIRE(cached == 80);
        REQUIRE(off["requests"][i]["cached_tokens"] == 0);
        total_prompt += static_cast<int>(prompts[i].size());
        total_cached += cached;
    }
    REQUIRE(on["requests"][0]["cached_tokens"] == 0);
    // What the cache saved, counted by the engine's own steps: a cached token
    // is never run through the model (no preemption here to recompute any).
    REQUIRE(on["pool"]["preemptions"] == 0);
    REQUIRE(on["prefill_tokens"] == total_prompt - total_cached);
    REQUIRE(off["prefill_tokens"] == total_prompt);
    REQUIRE(on["pool"]["hit_blocks"] == total_cached / kBlock);
    REQUIRE(off["pool"]["hit_blocks"] == 0);
    REQUIRE(off["pool"]["miss_blocks"] == 0);  // no lookup at all when the cache is off
    // Lookups cover the full blocks of each prompt's first T-1 tokens.
    int looked_up = 0;
    for (const auto& p : prompts) looked_up += (static_cast<int>(p.size()) - 1) / kBlock;
    REQUIRE(on["pool"]["hit_blocks"].get<int>() + on["pool"]["miss_blocks"].get<int>() ==
            looked_up);
}

TEST_CASE("generate --prompts --json has every key of the interface with the right type",
          "[cli][serving]") {
    const json j = serve({});
    REQUIRE(j["backend"] == "cpu-ref");
    REQUIRE(j["clock"].is_string());
    REQUIRE(j["steps"].is_number_integer());
    REQUIRE(j["requests"].is_array());
    REQUIRE(j["requests"].size() == 4);
    int decode_total = 0;
    for (std::size_t i = 0; i < j["requests"].size(); ++i) {
        INFO("request " << i);
        const json& r = j["requests"][i];
        for (const char* key :
             {"id", "line", "prompt_tokens", "cached_tokens", "computed_tokens", "preemptions"})
            REQUIRE(r[key].is_number_integer());
        REQUIRE(r["prompt_ids"].is_array());
        REQUIRE(r["prompt_tokens"] == r["prompt_ids"].size());
        REQUIRE(r["new_tokens"].is_array());
        for (const json& t : r["new_tokens"]) REQUIRE(t.is_number_integer());
        REQUIRE(r["text"].is_string());
        REQUIRE((r["finish_reason"] == "length" || r["finish_reason"] == "eos"));
        for (const char* key : {"ttft_ms", "tpot_ms", "e2e_ms"}) REQUIRE(r[key].is_number());
        REQUIRE(r["itl_ms"].is_object());
        REQUIRE(r["itl_ms"]["mean"].is_number());
        REQUIRE(r["itl_ms"]["p90"].is_number());
        // The figures hang together: TTFT within e2e; the gaps between the n
        // new tokens add up to e2e - TTFT, so mean ITL and TPOT are that over
        // n-1 (the engine computes them separately: one from the gaps, one
        // from the two end points); p90 is one of the gaps, so at most their sum.
        const double ttft = r["ttft_ms"], e2e = r["e2e_ms"];
        const int n = static_cast<int>(r["new_tokens"].size());
        REQUIRE(n >= 2);
        REQUIRE(ttft > 0);
        REQUIRE(e2e >= ttft);
        // 1e-9 ms absolute: the two sums round differently in the last bits of a double.
        REQUIRE(std::fabs(r["tpot_ms"].get<double>() * (n - 1) - (e2e - ttft)) < 1e-9);
        REQUIRE(std::fabs(r["itl_ms"]["mean"].get<double>() * (n - 1) - (e2e - ttft)) < 1e-6);
        REQUIRE(r["itl_ms"]["p90"].get<double>() <= e2e - ttft + 1e-9);
        REQUIRE(r["itl_ms"]["p90"].get<double>() > 0);
        // Never preempted, so nothing recomputed: its prompt minus what was
        // cached, then one decode token per new token after the first.
        REQUIRE(r["preemptions"] == 0);
        REQUIRE(r["computed_tokens"] ==
                r["prompt_tokens"].get<int>() - r["cached_tokens"].get<int>() + n - 1);
        decode_total += n - 1;
    }
    REQUIRE(j["decode_tokens"] == decode_total);
    const json& pool = j["pool"];
    for (const char* key : {"blocks", "block_size", "blocks_in_use", "cached_free_blocks",
                            "free_blocks", "hit_blocks", "miss_blocks", "evictions", "preemptions"})
        REQUIRE(pool[key].is_number_integer());
    REQUIRE(pool["block_size"] == kBlock);
    // The default pool: 4 sequences of max_seq_len 256 in blocks of 8.
    REQUIRE(pool["blocks"] == 4 * 256 / kBlock);
    // Every request finished: no block is still held (no leak), all are free.
    REQUIRE(pool["blocks_in_use"] == 0);
    REQUIRE(pool["free_blocks"] == pool["blocks"]);
    REQUIRE(pool["cached_free_blocks"].get<int>() > 0);
}

TEST_CASE("generate --prompts reads JSON Lines: max_new_tokens per line, -n for the others",
          "[cli][serving]") {
    // A prompt with a newline inside (only JSON Lines can hold one), and a
    // request of one new token, whose inter-token figures are null (no gap).
    const std::string two_lines = "Line one\nline two";
    const std::string file = write_file(
        "requests.jsonl", "{\"prompt\": \"" + kPrefix + "\", \"max_new_tokens\": 2}\n\n" +
                              "{\"prompt\": \"Line one\\nline two\"}\n" +
                              "{\"max_new_tokens\": 5, \"prompt\": \"" + kPrefix + " again\"}\n" +
                              "{\"prompt\": \"x\", \"max_new_tokens\": 1}\n");
    const std::vector<std::string> options = {"--model",      small_model(), "--backend", "cpu-ref",
                                              "--block-size", "8",           "--no-stop"};
    std::vector<std::string> args = {"generate", "--prompts", file, "--json", "-n", "3"};
    args.insert(args.end(), options.begin(), options.end());
    const json j = parse_ok(run_cli(args));
    REQUIRE(j["requests"].size() == 4);
    const std::vector<std::string> texts = {kPrefix, two_lines, kPrefix + " again", "x"};
    const std::vector<int> lengths = {2, 3, 5, 1};
    const std::vector<int> lines = {1, 3, 4, 5};
    for (std::size_t i = 0; i < texts.size(); ++i) {
        INFO("request " << i);
        const json& r = j["requests"][i];
        REQUIRE(r["line"] == lines[i]);
        REQUIRE(r["new_tokens"].size() == static_cast<std::size_t>(lengths[i]));
        REQUIRE(r["finish_reason"] == "length");
        std::vector<std::string> one = {"generate", "--json", "-n", std::to_string(lengths[i])};
        one.insert(one.end(), options.begin(), options.end());
        one.push_back(texts[i]);
        const json a = parse_ok(run_cli(one));
        REQUIRE(ids_of(r["prompt_ids"]) == ids_of(a["prompt_tokens"]));
        REQUIRE(ids_of(r["new_tokens"]) == ids_of(a["new_tokens"]));
    }
    // The third request shares the first one's 10 full blocks.
    REQUIRE(j["requests"][2]["cached_tokens"] == 80);
    const json& single = j["requests"][3];
    REQUIRE(single["itl_ms"]["mean"].is_null());
    REQUIRE(single["itl_ms"]["p90"].is_null());
    REQUIRE(single["tpot_ms"].is_null());
    REQUIRE(single["e2e_ms"] == single["ttft_ms"]);
}

TEST_CASE(
    "generate --prompts under a pool too small for all at once preempts and still gives "
    "each prompt its tokens alone",
    "[cli][serving]") {
    // 16 blocks of 8: each request needs 11 or 12 (prompt + 5 fed-back tokens),
    // the shared prefix 10 of them; the decode steps run out of blocks.
    const json j = serve({"--kv-blocks", "16"});
    REQUIRE(j["pool"]["blocks"] == 16);
    REQUIRE(j["pool"]["preemptions"].get<int>() > 0);
    int preempted = 0;
    for (const json& r : j["requests"]) preempted += r["preemptions"].get<int>();
    REQUIRE(preempted == j["pool"]["preemptions"]);
    require_same_as_alone(j);
    REQUIRE(j["pool"]["blocks_in_use"] == 0);
}

TEST_CASE(
    "generate --prompts with a sampling temperature: each request samples what it samples alone "
    "(the same seed for every request)",
    "[cli][serving]") {
    const std::vector<std::string> sampling = {"--temperature", "0.9", "--top-k", "20",
                                               "--seed",        "7"};
    const json j = serve(sampling);
    REQUIRE(j["requests"].size() == kPrompts.size());
    for (std::size_t i = 0; i < kPrompts.size(); ++i) {
        INFO("request " << i);
        const json a = alone(kPrompts[i], sampling);
        REQUIRE(ids_of(j["requests"][i]["new_tokens"]) == ids_of(a["new_tokens"]));
    }
    // Sampling really happened: some answer differs from its greedy one; and
    // the repeated prompt (request 3 = request 0) answers alike.
    bool differs = false;
    for (std::size_t i = 0; i < kPrompts.size(); ++i)
        differs |= j["requests"][i]["new_tokens"] != alone_runs()[i]["new_tokens"];
    REQUIRE(differs);
    REQUIRE(j["requests"][3]["new_tokens"] == j["requests"][0]["new_tokens"]);
}

TEST_CASE("generate --prompts: bad input is one clear line and exit 1", "[cli][serving]") {
    const std::string m = small_model();
    auto gen = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = {"generate", "--model", m};
        args.insert(args.end(), extra.begin(), extra.end());
        return run_cli(args);
    };
    const std::string good = prompts_file();
    // The file.
    require_one_line_cli_error(gen({"--prompts", write_file("empty.txt", "")}),
                               "holds no prompt (it is empty)");
    require_one_line_cli_error(gen({"--prompts", write_file("blank.txt", "\n  \n\t\n")}),
                               "holds no prompt (3 blank lines)");
    const std::string missing = (fs::path(good).parent_path() / "no_such_file.txt").string();
    require_one_line_cli_error(gen({"--prompts", missing}),
                               "cannot read prompts file " + missing + ": no such file");
    require_one_line_cli_error(gen({"--prompts", fs::path(good).parent_path().string()}),
                               "is a directory");
    // JSON Lines: the line number of the bad line (blank lines counted, as an editor does).
    const std::string ok_line = "{\"prompt\": \"abc\"}\n";
    require_one_line_cli_error(
        gen({"--prompts", write_file("bad.jsonl", ok_line + "\n{\"prompt\": \"ab\",}\n")}),
        "bad.jsonl line 3: malformed JSON at column");
    require_one_line_cli_error(
        gen({"--prompts", write_file("no_prompt.jsonl", ok_line + "{\"max_new_tokens\": 3}\n")}),
        "no_prompt.jsonl line 2: no \"prompt\" key");
    require_one_line_cli_error(
        gen({"--prompts", write_file("number_prompt.jsonl", "{\"prompt\": 42}\n")}),
        "number_prompt.jsonl line 1: \"prompt\" is a number");
    require_one_line_cli_error(
        gen({"--prompts", write_file("array.jsonl", ok_line + "{\"prompt\": [\"abc\"]}\n")}),
        "array.jsonl line 2: \"prompt\" is an array");
    require_one_line_cli_error(
        gen({"--prompts", write_file("typo.jsonl", "{\"prompt\": \"a\", \"max_tokens\": 3}\n")}),
        "typo.jsonl line 1: unknown key \"max_tokens\"");
    require_one_line_cli_error(
        gen({"--prompts",
             write_file("zero_n.jsonl", "{\"prompt\": \"a\", \"max_new_tokens\": 0}\n")}),
        "zero_n.jsonl line 1: \"max_new_tokens\" is 0");
    require_one_line_cli_error(
        gen({"--prompts", write_file("long.txt", "ok\n" + std::string(300, 'a') + "\n")}),
        "long.txt line 2: prompt of 301 tokens is longer than the model's max_seq_len 256");
    // The pool.
    require_one_line_cli_error(gen({"--prompts", good, "--kv-blocks", "0"}),
                               "--kv-blocks 0: the pool needs at least one block");
    require_one_line_cli_error(gen({"--prompts", good, "--kv-blocks", "-2"}),
                               "--kv-blocks -2: the pool needs at least one block");
    // A request larger than the whole pool: 10 bytes + BOS, 5 new tokens of
    // which 4 are fed back: 15 positions = 4 blocks of 4; the pool has 3. The
    // engine's own line reaches the user, with the file's line in front.
    const std::string small = write_file("small.txt", "abcdefghij\n");
    require_one_line_cli_error(
        gen({"--prompts", small, "--kv-blocks", "3", "--block-size", "4", "-n", "5"}),
        "small.txt line 1: request 0 needs 4 KV blocks of 4 positions (11 prompt + 4 fed-back "
        "new tokens) but the whole pool has 3; give --kv-blocks 4 or more");
    REQUIRE(
        gen({"--prompts", small, "--kv-blocks", "4", "--block-size", "4", "-n", "5"}).exit_code ==
        0);
    // Options that do not go with --prompts, and --prefix-cache's values.
    require_one_line_cli_error(gen({"--prompts", good, "--tokens", "1,2"}),
                               "--prompts FILE gives every prompt");
    require_one_line_cli_error(gen({"--prompts", good, "some text"}),
                               "--prompts FILE gives every prompt");
    require_one_line_cli_error(gen({"--prompts", good, "--prompt-file", good}),
                               "--prompts FILE gives every prompt");
    require_one_line_cli_error(gen({"--prompts", good, "--mask", "window:4"}),
                               "--prompts serves causal requests only");
    require_one_line_cli_error(gen({"--prompts", good, "--chunks", "4"}),
                               "--chunks is the chunk plan of a single prompt");
    require_one_line_cli_error(gen({"--prompts", good, "--repeats", "2"}),
                               "--repeats times one prompt's warm runs");
    require_one_line_cli_error(gen({"--prompts", good, "--prefix-cache", "yes"}),
                               "--prefix-cache 'yes': give on or off");
    require_one_line_cli_error(gen({"--kv-blocks", "8", "abc"}),
                               "--kv-blocks and --prefix-cache set up the engine's shared pool");
}
