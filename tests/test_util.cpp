#include "test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>

#include "core/error.h"

namespace plab::test {

std::vector<float> random_floats(std::size_t n, std::uint64_t seed, float lo, float hi) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

std::vector<int32_t> random_tokens(int n, int vocab, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int32_t> dist(0, vocab - 1);
    std::vector<int32_t> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = dist(rng);
    return v;
}

ModelConfig small_config(int dim, int n_layers, int n_heads, int n_kv_heads, int head_dim,
                         int hidden_dim, int vocab, int max_seq_len) {
    ModelConfig c;
    c.dim = dim;
    c.n_layers = n_layers;
    c.n_heads = n_heads;
    c.n_kv_heads = n_kv_heads;
    c.head_dim = head_dim;
    c.hidden_dim = hidden_dim;
    c.vocab_size = vocab;
    c.max_seq_len = max_seq_len;
    c.validate();
    return c;
}

void require_allclose(const std::vector<float>& actual, const std::vector<float>& expected,
                      double atol, double rtol, const std::string& why) {
    REQUIRE(actual.size() == expected.size());
    for (std::size_t i = 0; i < actual.size(); ++i) {
        const double a = actual[i], e = expected[i];
        const double tol = atol + rtol * std::fabs(e);
        if (!(std::fabs(a - e) <= tol)) {
            FAIL_CHECK("element " << i << ": actual " << a << " vs expected " << e << " (|diff| "
                                  << std::fabs(a - e) << " > tol " << tol << "; " << why << ")");
            REQUIRE(false);
        }
    }
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void require_bitwise_equal(const std::vector<float>& actual, const std::vector<float>& expected,
                           const std::string& what) {
    REQUIRE(actual.size() == expected.size());
    if (actual.empty()) return;
    if (std::memcmp(actual.data(), expected.data(), actual.size() * sizeof(float)) != 0) {
        for (std::size_t i = 0; i < actual.size(); ++i) {
            if (std::memcmp(&actual[i], &expected[i], sizeof(float)) != 0) {
                FAIL(what << ": first bit difference at element " << i << ": " << actual[i]
                          << " vs " << expected[i]);
            }
        }
    }
}

void require_not_all_zero(const std::vector<float>& v, const std::string& what) {
    bool any = false;
    for (float x : v) any = any || x != 0.0f;
    INFO(what);
    REQUIRE(any);
}

void require_error(const std::function<void()>& fn, const std::string& fragment) {
    try {
        fn();
    } catch (const plab::Error& e) {
        const std::string msg = e.what();
        INFO("error message: " << msg);
        CHECK(msg.find('\n') == std::string::npos);
        REQUIRE(msg.find(fragment) != std::string::npos);
        return;
    }
    FAIL("expected a plab::Error mentioning '" << fragment << "'");
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    double m = 0;
    for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
    return m;
}

std::map<std::string, int> count_by_op(const std::vector<DeviceOpTime>& ops) {
    std::map<std::string, int> n;
    for (const DeviceOpTime& op : ops) n[op.op] += 1;
    return n;
}

std::map<std::string, int> ops_while(Backend& b, const std::function<void()>& run) {
    b.take_device_op_times();
    b.set_device_op_timing(true);
    run();
    b.set_device_op_timing(false);
    return count_by_op(b.take_device_op_times());
}

std::vector<int32_t> shuffled_block_table(int n_blocks, int pool_blocks, std::uint64_t seed) {
    std::vector<int32_t> all(static_cast<std::size_t>(pool_blocks));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), std::mt19937_64(seed));
    all.resize(static_cast<std::size_t>(n_blocks));
    return all;
}

DeviceArray upload(Backend& b, const std::vector<float>& host) {
    DeviceArray a(b, host.size());
    b.upload(a.buf(), host.data(), host.size());
    return a;
}

std::vector<float> download(Backend& b, const DeviceArray& a) {
    std::vector<float> h(a.size());
    b.download(h.data(), a.buf(), h.size());
    return h;
}

static std::string shell_quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

std::string read_bytes(const std::filesystem::path& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

void write_bytes(const std::filesystem::path& path, const std::string& data) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

CliResult run_command(const std::string& command_line) {
    char out_path[] = "/tmp/plab_test_outXXXXXX";
    char err_path[] = "/tmp/plab_test_errXXXXXX";
    const int fo = mkstemp(out_path);
    const int fe = mkstemp(err_path);
    REQUIRE((fo >= 0 && fe >= 0));
    const std::string cmd = command_line + " </dev/null >" + out_path + " 2>" + err_path;
    const int status = std::system(cmd.c_str());
    CliResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = read_bytes(out_path);
    r.err = read_bytes(err_path);
    std::remove(out_path);
    std::remove(err_path);
    return r;
}

CliResult run_cli(const std::vector<std::string>& args) {
    return run_cli_env("", args);
}

CliResult run_cli_env(const std::string& env, const std::vector<std::string>& args) {
    std::string cmd = "env " + env + " " + shell_quote(PLAB_CLI);
    for (const auto& a : args) cmd += " " + shell_quote(a);
    return run_command(cmd);
}

std::filesystem::path process_temp_dir(const std::string& name) {
    struct Dir {
        std::filesystem::path path;
        ~Dir() {
            std::error_code ec;
            std::filesystem::remove_all(path, ec);
        }
    };
    static std::map<std::string, std::unique_ptr<Dir>> dirs;  // destroyed at exit
    auto& d = dirs[name];
    if (!d) {
        d = std::make_unique<Dir>();
        d->path =
            std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
    }
    std::filesystem::create_directories(d->path);
    return d->path;
}

void require_one_line_cli_error(const CliResult& r, const std::string& fragment) {
    INFO("stderr: " << r.err << "stdout: " << r.out);
    REQUIRE(r.exit_code == 1);
    REQUIRE(r.err.rfind("plab: error: ", 0) == 0);
    REQUIRE(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    REQUIRE(r.err.find(fragment) != std::string::npos);
}

CliRandomModel::CliRandomModel(const std::string& name, int seed)
    : dir((std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid())))
              .string()) {
    REQUIRE(run_cli({"random-model", dir, "--seed", std::to_string(seed)}).exit_code == 0);
}

CliRandomModel::~CliRandomModel() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
}

}  // namespace plab::test
