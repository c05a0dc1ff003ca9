// What every fuzz harness shares (tests/fuzz/CMakeLists.txt says how they run).
//
// The contract a parser keeps for *any* bytes: it returns a valid value or
// throws plab::Error (one line for the user). Anything else is a bug the
// fuzzer reports as a crash: a sanitizer finding, a PLAB_ASSERT (InternalError),
// another exception type, an allocation over libFuzzer's limit, a hang, or a
// broken property of an accepted input (PLAB_FUZZ_REQUIRE).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string_view>

#include "core/error.h"

// A property an accepted input must have; aborts (a crash libFuzzer records) if not.
#define PLAB_FUZZ_REQUIRE(cond)                                                          \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            std::fprintf(stderr, "fuzz property failed: %s at %s:%d\n", #cond, __FILE__, \
                         __LINE__);                                                      \
            std::abort();                                                                \
        }                                                                                \
    } while (0)

namespace plab::fuzz {

// Runs `parse`; a plab::Error is the parser refusing bad input, which is fine.
template <class F>
void refusal_is_fine(F&& parse) {
    try {
        parse();
    } catch (const plab::Error&) {
    }
}

inline std::span<const char> as_bytes(const std::uint8_t* data, std::size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

}  // namespace plab::fuzz
