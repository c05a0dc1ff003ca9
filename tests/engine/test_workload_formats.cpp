// The workloads serving benchmarks use (serving/workload_formats.h): ShareGPT
// conversations and input_len/output_len lines read as plab workloads, and a
// replayed workload exported and read back to the same replay.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "serving/workload_formats.h"
#include "test_util.h"

namespace plab::test {
namespace {

std::string write_file(const std::string& name, const std::string& text) {
    const auto path = process_temp_dir("plab_workload_formats") / name;
    std::ofstream(path) << text;
    return path.string();
}

// Three conversations: lengths from words (the first), from counts (the
// second), and one with no answer to its human turn (skipped).
const char* kShareGpt = R"([
  {"id": "a", "conversations": [
    {"from": "system", "value": "be brief"},
    {"from": "human", "value": "one two three four five six seven eight nine ten"},
    {"from": "gpt", "value": "alpha beta gamma delta"}]},
  {"id": "b", "conversations": [
    {"from": "human", "value": "long document", "tokens": 17000},
    {"from": "gpt", "value": "summary", "tokens": 300},
    {"from": "human", "value": "and then?"}]},
  {"id": "c", "conversations": [{"from": "human", "value": "hello?"}]}
])";

}  // namespace

TEST_CASE("workload formats: ShareGPT turns and input_len lines become lengths at a rate",
          "[serve][workload]") {
    WorkloadFormatOptions o;
    o.rate = 2;
    o.seed = 3;
    o.tokens_per_word = 1.3;
    CHECK(workload_format(kShareGpt) == "sharegpt");
    const Workload s = read_workload(kShareGpt, "chats.json", o);
    REQUIRE(s.requests.size() == 2);
    CHECK(s.requests[0].prompt_tokens == 13);     // 10 words x 1.3
    CHECK(s.requests[0].max_new_tokens == 5);     // 4 words x 1.3 = 5.2
    CHECK(s.requests[1].prompt_tokens == 17000);  // the counts the file gives
    CHECK(s.requests[1].max_new_tokens == 300);
    CHECK(s.source.find("2 conversations, 1 skipped") != std::string::npos);
    CHECK(s.source.find("1.3 tokens a word") != std::string::npos);
    CHECK(s.requests[0].arrival_s == 0);
    CHECK(s.requests[1].arrival_s > 0);
    // The same seed, the same arrivals; another seed, others.
    CHECK(read_workload(kShareGpt, "chats.json", o).requests[1].arrival_s ==
          s.requests[1].arrival_s);
    o.seed = 4;
    CHECK(read_workload(kShareGpt, "chats.json", o).requests[1].arrival_s !=
          s.requests[1].arrival_s);

    const char* lines =
        "{\"input_len\": 1024, \"output_len\": 128}\n\n"
        "{\"input_len\": 32000, \"output_len\": 7}\n";
    CHECK(workload_format(lines) == "input_len");
    const Workload v = read_workload(lines, "random.jsonl", o);
    REQUIRE(v.requests.size() == 2);
    CHECK(v.requests[1].prompt_tokens == 32000);
    CHECK(v.requests[1].max_new_tokens == 7);
    CHECK(v.requests[1].line == 3);

    require_error([&] { read_workload("[{\"id\": 1}]", "bad.json", o); },
                  "bad.json conversation 0: needs \"conversations\"");
    require_error([&] { read_workload("[{\"conversations\": [{\"from\": \"human\"}]}]", "x", o); },
                  "every turn needs a string \"from\" and a string \"value\"");
    require_error([&] { read_workload("[{\"conversations\": []}]", "x", o); },
                  "x: no conversation has a human turn followed by an answer");
    require_error([&] { read_workload("{\"input_len\": 0, \"output_len\": 5}", "y", o); },
                  "y line 1: \"input_len\" must be a whole number between 1 and");
    require_error([&] { read_workload("{\"input_len\": 5, \"max_tokens\": 5}", "y", o); },
                  "the keys are \"input_len\" and \"output_len\"");
    o.rate = 0;
    require_error([&] { read_workload(lines, "z", o); },
                  "they come from --rate, which must be > 0");
}

TEST_CASE(
    "plab serve --export-workload writes the replayed workload and reading it back replays the "
    "same",
    "[serve][workload][cli]") {
    const std::string chats = write_file("chats.json", kShareGpt);
    const std::string out = (process_temp_dir("plab_workload_formats") / "exported.jsonl").string();
    const std::vector<std::string> card{"--hardware", "h100-sxm",   "--shape",
                                        "qwen2.5-7b", "--simulate", "--json"};
    std::vector<std::string> first{"serve", "--workload",        chats, "--rate",
                                   "5",     "--export-workload", out};
    first.insert(first.end(), card.begin(), card.end());
    const CliResult a = run_cli(first);
    REQUIRE(a.exit_code == 0);
    const std::string exported = read_bytes(out);
    CHECK(exported.find("\"prompt_tokens\":17000") != std::string::npos);
    std::vector<std::string> again{"serve", "--workload", out};
    again.insert(again.end(), card.begin(), card.end());
    const CliResult b = run_cli(again);
    REQUIRE(b.exit_code == 0);
    auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
    CHECK(ja.at("requests") == jb.at("requests"));
    CHECK(ja.at("summary") == jb.at("summary"));
    // A plab file gives its own arrivals: --rate is refused beside it.
    std::vector<std::string> clash{"serve", "--workload", out, "--rate", "3"};
    clash.insert(clash.end(), card.begin(), card.end() - 1);
    require_one_line_cli_error(run_cli(clash), "gives each request's arrival_s; drop --rate");
    require_one_line_cli_error(
        run_cli({"serve", "--requests", "2", "--export-workload", "/nonexistent/dir/w.jsonl"}),
        "--export-workload: cannot write /nonexistent/dir/w.jsonl");
}

}  // namespace plab::test
