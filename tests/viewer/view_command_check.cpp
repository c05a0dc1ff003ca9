// Issue 17: does the viewer's "command for this view" reproduce the panel's numbers?
// Reads the viewer's stdout ("viewer computed: first token ID, top ID:HEXFLOAT ...") and
// the command's `plab prefill --json` output, and compares the first token and every top
// probability bit for bit (the command runs the same engine on the same inputs, so
// there is no tolerance to state). For the serving scene (issue 61: "serving: N steps,
// P preemptions; prompt tokens ...; arrival_s ...; ttft_ms ...") against `plab serve
// --json`: the seeded workload and its result, bit for bit, wherever the viewer ran
// (natively, or as the web page built with another C++ library). For the flash scene
// ("flash: N steps, ...; output ...; full ...") against `plab flash --json`.
// Usage: plab_view_command_check VIEWER_OUT JSON
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

// The flash scene ("N steps, R rescales, S skipped; output X,...; full Y,...") against
// `plab flash --json`: the same walk (its steps, rescales and skipped tiles) and every
// output and whole softmax, bit for bit.
int check_flash_numbers(const std::string& line, const nlohmann::json& j) {
    int bad = 0;
    long cli_steps = 0;
    for (const auto& q : j.at("queries")) cli_steps += static_cast<long>(q.at("steps").size());
    const long steps = std::strtol(line.c_str(), nullptr, 10);
    const std::size_t r_at = line.find("steps, "), s_at = line.find("rescales, ");
    const long rescales =
        r_at == std::string::npos ? -1 : std::strtol(line.c_str() + r_at + 7, nullptr, 10);
    const long skipped =
        s_at == std::string::npos ? -1 : std::strtol(line.c_str() + s_at + 10, nullptr, 10);
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
