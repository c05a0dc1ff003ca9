// Shared test helpers: seeded random data, one closeness checker, running the CLI.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/backend.h"
#include "model/config.h"

namespace plab::test {

// True in the ASan + UBSan build (preset asan, `make test-asan`). There the
// SIMT emulator of the gpu backends runs ~100x slower than in the normal build
// (every fiber switch is announced to ASan), so a few tests give the emulated
// GPU backends a shorter run; the normal build runs them in full.
inline constexpr bool kSanitized = PLAB_SANITIZED;

// Seeded uniform floats in [lo, hi): never zeros by accident.
std::vector<float> random_floats(std::size_t n, std::uint64_t seed, float lo = -1.0f,
                                 float hi = 1.0f);
std::vector<int32_t> random_tokens(int n, int vocab, std::uint64_t seed);

// A small random-shaped config from a seed: GQA and odd head counts included.
ModelConfig small_config(int dim, int n_layers, int n_heads, int n_kv_heads, int head_dim,
                         int hidden_dim, int vocab, int max_seq_len);

// Fails (one REQUIRE) unless every |a-e| <= atol + rtol·|e|; the message
// names the first bad index, both values, and `why` the tolerance is what it is.
void require_allclose(const std::vector<float>& actual, const std::vector<float>& expected,
                      double atol, double rtol, const std::string& why);
// Fails unless the two vectors have identical bits (NaN payloads included).
void require_bitwise_equal(const std::vector<float>& actual, const std::vector<float>& expected,
                           const std::string& what);
// True when the two vectors have identical bits (a check that returns, not a REQUIRE).
bool same_bits(const std::vector<float>& a, const std::vector<float>& b);
// Fails if every element is zero (a comparison of two all-zero outputs proves nothing).
void require_not_all_zero(const std::vector<float>& v, const std::string& what);

// Fails unless fn throws a plab::Error whose one-line message contains `fragment`.
void require_error(const std::function<void()>& fn, const std::string& fragment);

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b);

// How many of `ops` each op has: a timed prefill's launches (a GPU backend)
// or calls (perf/host_timed_backend.h), by Backend method name.
std::map<std::string, int> count_by_op(const std::vector<DeviceOpTime>& ops);
// The ops a GPU backend ran on the device while `run` ran, by name (device
// op timing on for just that long; what was timed before is dropped).
std::map<std::string, int> ops_while(Backend& b, const std::function<void()>& run);

// A sequence's block table of n_blocks over a pool of pool_blocks (the rest
// spare), the physical blocks in seeded shuffled order: kernels must follow it.
std::vector<int32_t> shuffled_block_table(int n_blocks, int pool_blocks, std::uint64_t seed);

// Host data on a backend, and a backend's array back on the host.
DeviceArray upload(Backend& b, const std::vector<float>& host);
std::vector<float> download(Backend& b, const DeviceArray& a);

struct CliResult {
    int exit_code = -1;
    std::string out;  // stdout
    std::string err;  // stderr
};
// Runs the built `plab` binary with these arguments (shell-quoted for you).
CliResult run_cli(const std::vector<std::string>& args);
// The same, with environment variables set for it: `env` is "NAME=value ..."
// (values without spaces).
CliResult run_cli_env(const std::string& env, const std::vector<std::string>& args);
// Runs any command line through the shell, capturing stdout and stderr.
CliResult run_command(const std::string& command_line);

// A scratch folder for this test process, temp dir / (name + "_" + pid): created on
// first use, removed when the process exits (ctest -j runs many processes at once,
// and another checkout's tests may run beside them).
std::filesystem::path process_temp_dir(const std::string& name);

// The whole of a file, byte for byte ("" when it cannot be read; tests then
// fail on the content), and a file replaced by exactly `data`.
std::string read_bytes(const std::filesystem::path& path);
void write_bytes(const std::filesystem::path& path, const std::string& data);

// Bad input's contract: exit 1, one line on stderr starting "plab: error: "
// that contains `fragment`.
void require_one_line_cli_error(const CliResult& r, const std::string& fragment);

// A seeded random model written by `plab random-model` into a folder of the
// temp directory named `name` + the process id; removed when destroyed (keep
// one as a function-local static: written once per test process).
struct CliRandomModel {
    CliRandomModel(const std::string& name, int seed);
    ~CliRandomModel();
    CliRandomModel(const CliRandomModel&) = delete;
    CliRandomModel& operator=(const CliRandomModel&) = delete;
    std::string dir;
};

}  // namespace plab::test
