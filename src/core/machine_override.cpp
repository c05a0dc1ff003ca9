#include "core/machine_override.h"

#include <Eigen/Core>
#include <array>
#include <charconv>
#include <cstdlib>
#include <mutex>
#include <string_view>

#include "core/error.h"

namespace plab {
namespace {

constexpr const char* kCachesForm =
    "PLAB_CPU_CACHES takes three sizes L1,L2,L3 in bytes, each with an optional K or M "
    "(e.g. 32K,1M,32M), each from 1K to 4096M and L1 <= L2 <= L3";

// One size: digits, then an optional K or M (binary units).
bool parse_size(std::string_view text, std::ptrdiff_t& bytes) {
    std::ptrdiff_t unit = 1;
    if (!text.empty() && (text.back() == 'K' || text.back() == 'k')) unit = 1024;
    if (!text.empty() && (text.back() == 'M' || text.back() == 'm')) unit = 1024 * 1024;
    if (unit != 1) text.remove_suffix(1);
    long long v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return false;
    if (v < 1 || v > 4096ll * 1024 * 1024 / unit) return false;
    bytes = static_cast<std::ptrdiff_t>(v) * unit;
    return bytes >= 1024;
}

std::array<std::ptrdiff_t, 3> parse_caches(const std::string& value) {
    std::array<std::ptrdiff_t, 3> sizes{};
    std::string_view rest = value;
    for (int i = 0; i < 3; ++i) {
        const std::size_t comma = rest.find(',');
        const bool last = i == 2;
        PLAB_CHECK(last == (comma == std::string_view::npos) &&
                       parse_size(rest.substr(0, comma), sizes[i]),
                   "PLAB_CPU_CACHES='" << value << "' is not valid: " << kCachesForm);
        if (!last) rest.remove_prefix(comma + 1);
    }
    PLAB_CHECK(sizes[0] <= sizes[1] && sizes[1] <= sizes[2],
               "PLAB_CPU_CACHES='" << value << "' is not valid: " << kCachesForm);
    return sizes;
}

const char* env(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? v : nullptr;
}

}  // namespace

int cpu_threads_override() {
    const char* v = env("PLAB_CPU_THREADS");
    if (v == nullptr) return 0;
    const std::string_view text(v);
    int n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    PLAB_CHECK(ec == std::errc() && end == text.data() + text.size() && n >= 1 && n <= 256,
               "PLAB_CPU_THREADS='" << text << "' is not valid: it takes the CPU count the "
                                    << "engine plans with, a whole number from 1 to 256");
    return n;
}

void apply_cpu_cache_override() {
    // Eigen keeps the sizes in a process-wide static that its products read:
    // set once, before the first product, never while one runs.
    static std::once_flag once;
    std::call_once(once, [] {
        if (const char* v = env("PLAB_CPU_CACHES")) {
            const auto s = parse_caches(v);
            Eigen::setCpuCacheSizes(s[0], s[1], s[2]);
        }
    });
}

void check_machine_override() {
    cpu_threads_override();
    apply_cpu_cache_override();
}

CpuCaches cpu_caches() {
    apply_cpu_cache_override();
    return {Eigen::l1CacheSize(), Eigen::l2CacheSize(), Eigen::l3CacheSize(),
            env("PLAB_CPU_CACHES") != nullptr};
}

}  // namespace plab
