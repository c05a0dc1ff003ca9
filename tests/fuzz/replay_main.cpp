// Replays fuzz inputs without libFuzzer: the g++ build links each harness's
// LLVMFuzzerTestOneInput with this main, so the normal test suite (`make test`)
// runs every committed crasher (regressions/<harness>/) and every seed
// (corpus/<harness>/) on each run. A crasher that crashes again fails the test
// (abort, or a sanitizer report in the asan build).
//
// Usage: fuzz_replay_<harness> PATH...   (files, or directories of files)
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace fs = std::filesystem;

int main(int argc, char** argv) {
    std::vector<fs::path> files;
    for (int i = 1; i < argc; ++i) {
        const fs::path p(argv[i]);
        if (fs::is_directory(p)) {
            for (const auto& e : fs::directory_iterator(p)) {
                if (e.is_regular_file()) files.push_back(e.path());
            }
        } else if (fs::is_regular_file(p)) {
            files.push_back(p);
        } else {
            std::fprintf(stderr, "replay: %s is neither a file nor a directory\n", argv[i]);
            return 2;
        }
    }
    std::sort(files.begin(), files.end());  // the same order on every run
    if (files.empty()) {
        std::fprintf(stderr, "replay: no inputs given; expected corpus or regression files\n");
        return 2;
    }
    for (const fs::path& f : files) {
        std::ifstream in(f, std::ios::binary);
        const std::vector<char> bytes{std::istreambuf_iterator<char>(in), {}};
        std::printf("replay %s (%zu bytes)\n", f.string().c_str(), bytes.size());
        std::fflush(stdout);  // the last name printed is the input that crashed
        LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    }
    std::printf("replayed %zu inputs, none crashed\n", files.size());
    return 0;
}
