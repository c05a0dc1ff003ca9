// Which kernels a fast backend runs: `invariant` (the default) or `fastest`
// (lesson 16: "Same request, different text").
//
// What it teaches: a library picks each product's kernel by the product's
// shape — a GEMV for one row, a blocked GEMM for more, its blocking sized by
// the call — because that is fastest for the shape. The order of the adds
// comes with the kernel, so a token's logits round differently when it is
// computed alone (a decode step of one sequence), beside batch-mates, in
// another chunk, or after a prefix-cache hit: the same request, other bits,
// and where two tokens nearly tie, other text. `invariant` kernels sum each
// output in one fixed order whatever the step's shape (cpu_gemm.h), so a
// request's bits belong to the request. The reference backends have one
// order by design, and gpu's kernels are invariant only: `fastest` is a
// choice of the cpu backend.
#pragma once

#include <string>

#include "core/error.h"

namespace plab {

enum class Kernels { invariant, fastest };

inline const char* kernels_name(Kernels k) {
    return k == Kernels::fastest ? "fastest" : "invariant";
}

// A backend's name with its kernel set: "cpu" stays "cpu" under invariant
// kernels and is "cpu-fastest" under fastest (what the backend and the
// CLI's lines call it).
inline std::string backend_name_with(const std::string& backend, Kernels k) {
    return k == Kernels::fastest ? backend + "-fastest" : backend;
}

// "invariant" or "fastest"; anything else is one plab::Error line.
inline Kernels parse_kernels(const std::string& s) {
    if (s == "invariant") return Kernels::invariant;
    if (s == "fastest") return Kernels::fastest;
    PLAB_CHECK(false, "--kernels '" << s
                                    << "' is not a kernel set; valid: invariant (the "
                                       "default: a request's bits whatever its step), fastest "
                                       "(cpu: the library's kernel for each product's shape)");
    return Kernels::invariant;
}

}  // namespace plab
