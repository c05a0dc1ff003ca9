#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "runtime/registry.h"
#include "runtime/session.h"
#include "test_util.h"

using namespace plab;

TEST_CASE("prefill emits chunk spans and per-layer KV appends with blocks", "[trace]") {
    auto be = make_backend("cpu-ref");
    const ModelConfig c = test::small_config(16, 2, 2, 1, 8, 24, 50, 32);
    const DeviceModel m(*be, make_random_weights(c, 1));
    Trace trace;
    SessionOptions so;
    so.block_size = 4;
    Session s(m, so, &trace);
    s.prefill(test::random_tokens(6, 50, 2), ChunkPlan{{5, 1}});
    std::vector<TraceEvent> appends;
    for (const auto& e : trace.events()) {
        if (e.name == "kv append") appends.push_back(e);
    }
    REQUIRE(appends.size() == 4);  // 2 chunks x 2 layers
    REQUIRE(appends[0].args.at("layer") == "0");
    REQUIRE(appends[0].args.at("positions") == "0-4");
    REQUIRE(appends[0].args.at("blocks") == "0,1");
    REQUIRE(appends[3].args.at("positions") == "5-5");
    REQUIRE(appends[3].args.at("blocks") == "1");
    const auto chunk = trace.find("prefill chunk");
    REQUIRE(chunk);
    REQUIRE(chunk->args.at("length") == "5");
    REQUIRE(trace.find("prefill")->dur_us >= chunk->dur_us);

    // Every event, after one metadata record naming the host track (a cpu
    // backend has no device track: its ops are not timed on a device).
    const auto j = nlohmann::json::parse(trace.to_chrome_json());
    REQUIRE(j["traceEvents"].size() == trace.events().size() + 1);
    REQUIRE(j["traceEvents"][0]["ph"] == "M");
    REQUIRE(j["traceEvents"][0]["args"]["name"] == "host");
    for (std::size_t i = 1; i < j["traceEvents"].size(); ++i) {
        REQUIRE(j["traceEvents"][i]["name"] == trace.events()[i - 1].name);
        REQUIRE(j["traceEvents"][i]["tid"] == 1);
    }
}
