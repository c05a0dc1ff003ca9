// The test of the replay (tests/fuzz/CMakeLists.txt): a "harness" that aborts
// on any input containing the word `abort`, as a parser bug would. Replayed
// over this very file (which contains the word), the run must fail.
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    if (text.find("abort") != std::string_view::npos) std::abort();
    return 0;
}
