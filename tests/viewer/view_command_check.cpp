// Issue 17: does the viewer's "command for this view" reproduce the panel's numbers?
// Reads the viewer's stdout ("viewer computed: first token ID, top ID:HEXFLOAT ...") and
// the command's `plab prefill --json` output, and compares the first token and every top
// probability bit for bit (the command runs the same engine on the same inputs, so
// there is no tolerance to state). For the serving scene (issue 61: "serving: N steps,
// P preemptions; prompt tokens ...; arrival_s ...; ttft_ms ...") against `plab serve
// --json`: the seeded workload and its result, bit for bit, wherever the viewer ran
// (natively, or as the web page built with another C++ library). For the flash scene
// ("flash: N steps, ...; output ...; full ...") against `plab flash --json`: the toy's
// walk, or a model head's (`plab flash --model ... --layer L --head H --json`, keys in
// src/cli/cmd_flash_model.cpp).
// Usage: plab_view_command_check VIEWER_OUT JSON
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace {

// "A,B,C" after `label ` up to the next ';' (or the end), each read by strtod
// (decimal or C99 hex float, exactly).
std::vector<double> list_after(const std::string& line, const std::string& label) {
    std::vector<double> out;
    const std::size_t at = line.find(label + " ");
    if (at == std::string::npos) return out;
    const std::size_t end = line.find(';', at);
    std::istringstream s(line.substr(at + label.size() + 1, end - at - label.size() - 1));
    for (std::string word; std::getline(s, word, ',');)
        out.push_back(std::strtod(word.c_str(), nullptr));
    return out;
}

int check_serving(const std::string& line, const nlohmann::json& j) {
    int bad = 0;
    const long steps = std::strtol(line.c_str(), nullptr, 10);
    const std::size_t comma = line.find(", ");
    const long preemptions =
        comma == std::string::npos ? -1 : std::strtol(line.c_str() + comma + 2, nullptr, 10);
    long cli_preemptions = 0;
    for (const auto& r : j.at("requests")) cli_preemptions += r.at("preemptions").get<long>();
    const long cli_steps = static_cast<long>(j.at("steps").size());
    std::printf("steps: viewer %ld, plab %ld; preemptions: viewer %ld, plab %ld\n", steps,
                cli_steps, preemptions, cli_preemptions);
    bad += steps != cli_steps || preemptions != cli_preemptions;
    for (const char* key : {"prompt tokens", "arrival_s", "ttft_ms"}) {
        const std::vector<double> viewer = list_after(line, key);
        const std::string json_key = std::string(key) == "prompt tokens" ? "prompt_tokens" : key;
        std::vector<double> cli;
        for (const auto& r : j.at("requests")) cli.push_back(r.at(json_key).get<double>());
        const bool same = viewer.size() == cli.size() && !cli.empty() &&
                          std::memcmp(viewer.data(), cli.data(), cli.size() * sizeof(double)) == 0;
        std::printf("%s of %zu requests: viewer %zu values, first %.17g; plab first %.17g: %s\n",
                    key, cli.size(), viewer.size(), viewer.empty() ? 0.0 : viewer[0],
                    cli.empty() ? 0.0 : cli[0], same ? "same bits" : "DIFFERENT");
        bad += !same;
    }
    return bad == 0 ? 0 : 1;
}

// "N steps, R rescales, S skipped" at the start of the viewer's flash line.
struct FlashCounts {
    long steps = -1, rescales = -1, skipped = -1;
};
FlashCounts flash_counts(const std::string& line) {
    FlashCounts c;
    c.steps = std::strtol(line.c_str(), nullptr, 10);
    const std::size_t r_at = line.find("steps, "), s_at = line.find("rescales, ");
    if (r_at != std::string::npos) c.rescales = std::strtol(line.c_str() + r_at + 7, nullptr, 10);
    if (s_at != std::string::npos) c.skipped = std::strtol(line.c_str() + s_at + 10, nullptr, 10);
    return c;
}

// Floats between a and b (0: the same bits), as src/toy/rounding.h counts them: the bits
// mapped onto one ordered line, negatives below zero.
long long ulps_apart(float a, float b) {
    auto ordered = [](float x) {
        std::int32_t i = 0;
        std::memcpy(&i, &x, sizeof i);
        return i < 0 ? -static_cast<long long>(i & 0x7fffffff) : static_cast<long long>(i);
    };
    const long long d = ordered(a) - ordered(b);
    return d < 0 ? -d : d;
}

// A model head's walk against `plab flash --model ... --json`: the same steps (one per
// tile of "tiles"), rescales (their "rescaled") and tiles never loaded ("skipped" and
// "unreached"). The JSON holds no output per position, only the walk's differences from
// cpu-ref over every component: the viewer's outputs (first components) must be as many
// as "tokens" and no further from its whole softmax than "vs_cpu_ref"'s "max_ulps".
int check_flash_head_numbers(const std::string& line, const nlohmann::json& j) {
    const FlashCounts c = flash_counts(line);
    long cli_rescales = 0;
    for (const auto& t : j.at("tiles")) cli_rescales += t.at("rescaled").get<long>();
    const long cli_steps = static_cast<long>(j.at("tiles").size());
    const long cli_skipped = j.at("skipped").get<long>() + j.at("unreached").get<long>();
    std::printf(
        "model head: steps: viewer %ld, plab %ld; rescales: viewer %ld, plab %ld; never loaded: "
        "viewer %ld, plab %ld\n",
        c.steps, cli_steps, c.rescales, cli_rescales, c.skipped, cli_skipped);
    int bad = c.steps != cli_steps || c.rescales != cli_rescales || c.skipped != cli_skipped;
    const std::vector<double> output = list_after(line, "output"), full = list_after(line, "full");
    long long most = 0;
    for (std::size_t i = 0; i < output.size() && i < full.size(); ++i)
        most =
            std::max(most, ulps_apart(static_cast<float>(output[i]), static_cast<float>(full[i])));
    const long tokens = j.at("tokens").get<long>();
    const long long cli_most = j.at("vs_cpu_ref").at("max_ulps").get<long long>();
    const bool ok = static_cast<long>(output.size()) == tokens &&
                    static_cast<long>(full.size()) == tokens && most <= cli_most;
    std::printf(
        "outputs of %ld tokens: viewer %zu and %zu whole softmax values, at most %lld ulps "
        "apart; plab: at most %lld over every component: %s\n",
        tokens, output.size(), full.size(), most, cli_most, ok ? "consistent" : "DIFFERENT");
    bad += !ok;
    return bad == 0 ? 0 : 1;
}

// The flash scene ("N steps, R rescales, S skipped; output X,...; full Y,...") against
// `plab flash --json`: the same walk (its steps, rescales and skipped tiles) and every
// output and whole softmax, bit for bit (a model head: check_flash_head_numbers).
int check_flash_numbers(const std::string& line, const nlohmann::json& j) {
    if (j.contains("states")) return check_flash_head_numbers(line, j);
    int bad = 0;
    long cli_steps = 0;
    for (const auto& q : j.at("queries")) cli_steps += static_cast<long>(q.at("steps").size());
    const FlashCounts c = flash_counts(line);
    const long steps = c.steps, rescales = c.rescales, skipped = c.skipped;
    std::printf(
        "steps: viewer %ld, plab %ld; rescales: viewer %ld, plab %ld; skipped: viewer %ld, plab "
        "%ld\n",
        steps, cli_steps, rescales, j.at("rescales").get<long>(), skipped,
        j.at("skipped").get<long>());
    bad += steps != cli_steps || rescales != j.at("rescales").get<long>() ||
           skipped != j.at("skipped").get<long>();
    for (const char* key : {"output", "full"}) {
        const std::vector<double> viewer = list_after(line, key);
        std::vector<float> v, cli;
        for (double x : viewer) v.push_back(static_cast<float>(x));
        // plab prints each float widened to double (shortest round-trip): back to float exactly.
        for (const auto& q : j.at("queries"))
            cli.push_back(static_cast<float>(q.at(key).get<double>()));
        const bool same = v.size() == cli.size() && !cli.empty() &&
                          std::memcmp(v.data(), cli.data(), cli.size() * sizeof(float)) == 0;
        std::printf("%s of %zu queries: viewer %zu values, last %.9g; plab last %.9g: %s\n", key,
                    cli.size(), v.size(), v.empty() ? 0.0 : double(v.back()),
                    cli.empty() ? 0.0 : double(cli.back()), same ? "same bits" : "DIFFERENT");
        bad += !same;
    }
    return bad == 0 ? 0 : 1;
}

nlohmann::json read_json(const char* path) {
    std::ifstream in(path);
    nlohmann::json j;
    try {
        in >> j;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cannot parse %s as JSON: %s\n", path, e.what());
        std::exit(1);
    }
    return j;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: plab_view_command_check VIEWER_OUT PLAB_JSON\n");
        return 2;
    }
    std::ifstream vin(argv[1]);
    std::string line, numbers, serving, flash;
    const std::string key = "viewer computed: first token ";
    const std::string serving_key = "viewer computed: serving: ";
    const std::string flash_key = "viewer computed: flash: ";
    while (std::getline(vin, line)) {
        if (line.rfind(key, 0) == 0) numbers = line.substr(key.size());
        if (line.rfind(serving_key, 0) == 0) serving = line.substr(serving_key.size());
        if (line.rfind(flash_key, 0) == 0) flash = line.substr(flash_key.size());
    }
    if (!serving.empty()) return check_serving(serving, read_json(argv[2]));
    if (!flash.empty()) return check_flash_numbers(flash, read_json(argv[2]));
    if (numbers.empty()) {
        std::fprintf(stderr, "no 'viewer computed:' line in %s\n", argv[1]);
        return 1;
    }
    // "ID, top ID:PROB ID:PROB ..."
    const long first = std::strtol(numbers.c_str(), nullptr, 10);
    const std::size_t top_at = numbers.find(", top");
    std::istringstream s(top_at == std::string::npos ? "" : numbers.substr(top_at + 5));
    std::vector<std::pair<long, float>> top;
    std::string word;
    while (s >> word) {
        const std::size_t colon = word.find(':');
        if (colon == std::string::npos) break;
        top.emplace_back(std::strtol(word.c_str(), nullptr, 10),
                         std::strtof(word.c_str() + colon + 1, nullptr));
    }
    const nlohmann::json j = read_json(argv[2]);
    int bad = 0;
    const long cli_first = j.at("first_token").at("id").get<long>();
    std::printf("first token: viewer %ld, plab %ld\n", first, cli_first);
    bad += cli_first != first;
    const auto& jt = j.at("top");
    if (jt.size() != top.size() || top.empty()) {
        std::printf("top: viewer lists %zu, plab %zu\n", top.size(), jt.size());
        return 1;
    }
    for (std::size_t i = 0; i < top.size(); ++i) {
        const long id = jt[i].at("id").get<long>();
        // plab prints the float widened to double (shortest round-trip): back to float exactly.
        const float p = static_cast<float>(jt[i].at("prob").get<double>());
        const bool same = id == top[i].first && std::memcmp(&p, &top[i].second, sizeof p) == 0;
        std::printf("top %zu: viewer %ld %.9g, plab %ld %.9g: %s\n", i, top[i].first,
                    static_cast<double>(top[i].second), id, static_cast<double>(p),
                    same ? "same bits" : "DIFFERENT");
        bad += !same;
    }
    return bad == 0 ? 0 : 1;
}
