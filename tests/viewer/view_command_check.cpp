// Issue 17: does the viewer's "command for this view" reproduce the panel's numbers?
// Reads the viewer's stdout ("viewer computed: first token ID, top ID:HEXFLOAT ...") and
// the command's `plab prefill --json` output, and compares the first token and every top
// probability bit for bit (the command runs the same engine on the same inputs, so
// there is no tolerance to state). Usage: plab_view_command_check VIEWER_OUT JSON
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: plab_view_command_check VIEWER_OUT PLAB_JSON\n");
        return 2;
    }
    std::ifstream vin(argv[1]);
    std::string line, numbers;
    const std::string key = "viewer computed: first token ";
    while (std::getline(vin, line))
        if (line.rfind(key, 0) == 0) numbers = line.substr(key.size());
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
    std::ifstream jin(argv[2]);
    nlohmann::json j;
    try {
        jin >> j;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cannot parse %s as JSON: %s\n", argv[2], e.what());
        return 1;
    }
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
