// Model files: round trips are exact; broken files are rejected with a clear message.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "model/model_io.h"
#include "model/safetensors.h"
#include "runtime/equivalence.h"
#include "runtime/registry.h"
#include "test_util.h"

using namespace plab;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
    const fs::path d =
        fs::temp_directory_path() / ("plab_test_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

ModelConfig io_config() {
    ModelConfig c = test::small_config(24, 2, 3, 1, 8, 40, 258, 32);
    c.rope_theta = 5000;
    return c;
}

}  // namespace

TEST_CASE("save -> load gives bitwise identical weights and logits", "[model_io]") {
    const fs::path dir = temp_dir("roundtrip");
    for (bool tied : {false, true}) {
        ModelConfig c = io_config();
        c.tied_embeddings = tied;
        const Weights w = make_random_weights(c, 17);
        save_model(w, "byte", dir.string());
        const Model m = load_model(dir.string());
        REQUIRE(m.weights.config.rope_theta == 5000);
        REQUIRE(m.weights.config.tied_embeddings == tied);
        test::require_bitwise_equal(m.weights.layers[1].w_down, w.layers[1].w_down, "w_down");
        auto be = make_backend("cpu-ref");
        const DeviceModel a(*be, w), b(*be, m.weights);
        const auto tokens = test::random_tokens(11, c.vocab_size, 3);
        const auto sa = run_prefill_snapshot(a, tokens, ChunkPlan{{11}});
        const auto sb = run_prefill_snapshot(b, tokens, ChunkPlan{{11}});
        test::require_bitwise_equal(sb.last_logits, sa.last_logits, "logits after round trip");
    }
    fs::remove_all(dir);
}

TEST_CASE("safetensors: F16 and BF16 tensors widen to float", "[model_io]") {
    const fs::path dir = temp_dir("f16");
    // Header by hand: one F16 tensor [1.0, -2.0] and one BF16 tensor [0.5].
    const std::string header =
        R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"BF16","shape":[1],"data_offsets":[4,6]}})";
    std::string file(8, '\0');
    for (int i = 0; i < 8; ++i) file[i] = char((header.size() >> (8 * i)) & 0xff);
    file += header;
    const unsigned char data[6] = {0x00, 0x3c, 0x00, 0xc0, 0x00, 0x3f};
    file.append(reinterpret_cast<const char*>(data), 6);
    test::write_bytes(dir / "t.safetensors", file);
    const TensorMap t = read_safetensors((dir / "t.safetensors").string());
    REQUIRE(t.at("a").data == std::vector<float>{1.0f, -2.0f});
    REQUIRE(t.at("b").data == std::vector<float>{0.5f});
    fs::remove_all(dir);
}

TEST_CASE("broken model files are rejected with a clear message", "[model_io]") {
    const fs::path dir = temp_dir("broken");
    const Weights w = make_random_weights(io_config(), 1);
    auto fresh = [&] {
        save_model(w, "byte", dir.string());
        return test::read_bytes(dir / "model.safetensors");
    };
    const std::string good = fresh();
    auto expect = [&](const std::string& what) {
        INFO("expecting an error containing: " << what);
        REQUIRE_THROWS_WITH(load_model(dir.string()), Catch::Contains(what));
    };

    SECTION("truncated") {
        test::write_bytes(dir / "model.safetensors", good.substr(0, good.size() - 100));
        expect("outside the");
    }
    SECTION("too short") {
        test::write_bytes(dir / "model.safetensors", "abc");
        expect("too short");
    }
    SECTION("wrong header") {
        std::string bad = good;
        bad[8] = 'X';  // the JSON header no longer parses
        test::write_bytes(dir / "model.safetensors", bad);
        expect("not valid JSON");
    }
    SECTION("header length lies") {
        std::string bad = good;
        bad[5] = char(0x7f);
        test::write_bytes(dir / "model.safetensors", bad);
        expect("does not fit");
    }
    SECTION("shapes inconsistent with the config") {
        std::string cfg = test::read_bytes(dir / "config.json");
        const auto pos = cfg.find("\"intermediate_size\": 40");
        REQUIRE(pos != std::string::npos);
        cfg.replace(pos, 23, "\"intermediate_size\": 41");
        test::write_bytes(dir / "config.json", cfg);
        expect("has shape");
    }
    SECTION("NaN weights") {
        Weights nan_w = w;
        nan_w.layers[0].wq[5] = std::nanf("");
        // save_model validates too; write the tensors directly to get a NaN on disk.
        TensorMap t = read_safetensors((dir / "model.safetensors").string());
        t["model.layers.0.self_attn.q_proj.weight"].data[5] = std::nanf("");
        write_safetensors((dir / "model.safetensors").string(), t);
        expect("non-finite");
        REQUIRE_THROWS_WITH(save_model(nan_w, "byte", dir.string()), Catch::Contains("non-finite"));
    }
    SECTION("invalid config") {
        test::write_bytes(dir / "config.json", R"({"hidden_size": 24})");
        expect("missing integer");
        test::write_bytes(dir / "config.json", "{not json");
        expect("not valid JSON");
    }
    SECTION("missing files") {
        fs::remove(dir / "model.safetensors");
        expect("no model.safetensors");
        REQUIRE_THROWS_WITH(load_model((dir / "nope").string()), Catch::Contains("does not exist"));
    }
    fs::remove_all(dir);
}

TEST_CASE("config validation names the field and the valid range", "[model_io]") {
    ModelConfig c = io_config();
    c.n_kv_heads = 2;  // 3 heads are not a multiple of 2
    REQUIRE_THROWS_WITH(c.validate(), Catch::Contains("not a multiple of n_kv_heads"));
    c = io_config();
    c.dim = 0;
    REQUIRE_THROWS_WITH(c.validate(), Catch::Contains("dim = 0"));
    c = io_config();
    c.norm_eps = -1;
    REQUIRE_THROWS_WITH(c.validate(), Catch::Contains("norm_eps"));
}
