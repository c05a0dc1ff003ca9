// Errors: bad input versus broken invariants.
//
// PLAB_CHECK(cond, msg) rejects *input* (a file, a prompt, a flag, a chunk plan)
// with a plab::Error whose message says what is wrong and what would be right;
// the CLI prints it on one line and exits non-zero. PLAB_ASSERT guards the
// program's own invariants in every build type (no NDEBUG escape hatch): a
// failure is a bug in Prefill Lab, reported with file and line, never a crash.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace plab {

// Bad input: the message is meant for the user.
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// A broken internal invariant: the message is meant for a developer.
class InternalError : public std::logic_error {
public:
    using std::logic_error::logic_error;
};

}  // namespace plab

#define PLAB_CHECK(cond, msg)                          \
    do {                                               \
        if (!(cond)) {                                 \
            std::ostringstream plab_check_os_;         \
            plab_check_os_ << msg;                     \
            throw ::plab::Error(plab_check_os_.str()); \
        }                                              \
    } while (0)

#define PLAB_ASSERT(cond)                                                                \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            std::ostringstream plab_assert_os_;                                          \
            plab_assert_os_ << "internal error: " #cond " failed at " << __FILE__ << ':' \
                            << __LINE__;                                                 \
            throw ::plab::InternalError(plab_assert_os_.str());                          \
        }                                                                                \
    } while (0)
