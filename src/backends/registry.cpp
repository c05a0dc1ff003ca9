#include "backends/registry.h"

#include <sstream>

#include "backends/cpu_fast.h"
#include "backends/cpu_ref.h"
#include "core/error.h"

namespace plab {

std::vector<std::string> backend_names() {
    return {"cpu-ref", "cpu"};
}

std::unique_ptr<Backend> make_backend(const std::string& name) {
    if (name == "cpu-ref") return std::make_unique<CpuRefBackend>();
    if (name == "cpu") return std::make_unique<CpuFastBackend>();
    std::ostringstream valid;
    for (const auto& n : backend_names()) valid << (valid.tellp() > 0 ? ", " : "") << n;
    PLAB_CHECK(false, "unknown backend '" << name << "'; valid backends: " << valid.str());
    return nullptr;
}

}  // namespace plab
