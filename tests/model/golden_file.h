// Reading the golden files of tests/golden/ (format in tests/golden/README.md).
//
// What it teaches: a golden file says what it is (magic, version) and how to
// make it again, so a stale or foreign file fails loudly instead of comparing
// against garbage. Left out: writing (only tests/reference/make_golden.py writes).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"

namespace plab::test {

struct GoldenCase {
    std::string name;
    std::string text;  // empty when the prompt was given as ids
    std::vector<int32_t> tokens;
    std::vector<float> logits;  // (T, V) row-major
    int argmax_last = -1;
};

struct GoldenFile {
    std::string model;  // repo-relative path of the model it was computed on
    int vocab = 0;
    std::vector<GoldenCase> cases;
};

inline GoldenFile read_golden(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    PLAB_CHECK(f.good(), "cannot read golden file " << path);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string d = ss.str();
    PLAB_CHECK(d.size() >= 16 && d.compare(0, 8, "PLABGOLD") == 0,
               path << ": not a golden file (magic PLABGOLD expected); regenerate with "
                       "/usr/bin/python3 tests/reference/make_golden.py");
    std::uint32_t version, n;
    std::memcpy(&version, d.data() + 8, 4);
    std::memcpy(&n, d.data() + 12, 4);
    PLAB_CHECK(version == 1, path << ": golden version " << version << ", this test reads 1");
    PLAB_CHECK(16 + std::size_t(n) <= d.size(), path << ": JSON length " << n << " past the end");
    const auto j = nlohmann::json::parse(d.substr(16, n));
    GoldenFile g;
    g.model = j.at("model").get<std::string>();
    g.vocab = j.at("vocab").get<int>();
    const std::size_t data0 = 16 + std::size_t(n);
    for (const auto& c : j.at("cases")) {
        GoldenCase gc;
        gc.name = c.at("name").get<std::string>();
        if (!c.at("text").is_null()) gc.text = c.at("text").get<std::string>();
        gc.tokens = c.at("tokens").get<std::vector<int32_t>>();
        gc.argmax_last = c.at("argmax_last").get<int>();
        const std::size_t off = c.at("offset").get<std::size_t>();
        const std::size_t count = gc.tokens.size() * std::size_t(g.vocab);
        PLAB_CHECK(data0 + (off + count) * 4 <= d.size(),
                   path << ": case " << gc.name << " runs past the end of the file");
        gc.logits.resize(count);
        std::memcpy(gc.logits.data(), d.data() + data0 + off * 4, count * 4);
        g.cases.push_back(std::move(gc));
    }
    return g;
}

}  // namespace plab::test
