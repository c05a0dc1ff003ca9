// Every Backend op on every backend against cpu-ref, as one table (issue 44,
// part 7), in the style of ggml's test-backend-ops.
//
// What it shows: the forward pass is written once over the Backend interface
// (core/backend.h), so an op must mean the same thing wherever it runs. Each
// row of the table is one op with a few odd shapes (1, 7, 33, 65 and 129
// rows; widths and head dims that are no multiple of 4, 8 or 16; GQA;
// shuffled block tables with spare and freed blocks; masks that look back a
// window or ahead in a prefix, with score modifiers); each column is a
// backend the registry offers. A cell runs the op on seeded random inputs
// (never zeros) into outputs poisoned with NaN and compares what it wrote
// with cpu-ref's run on the same inputs: bit for bit on the reference
// backends (the project's promise: gpu-ref == cpu-ref), within the row's
// stated tolerance on the fast ones, each with the reason for it. Unused KV
// pool slots hold NaN too, so a kernel that reads a key it should not, or
// writes a slot it should not, fails. The table is printed once:
//
//   // clang-format off
//   op (shapes)         cpu-ref      cpu                 gpu-ref (emulated)  gpu (emulated)
//   embed (3)           bitwise      bitwise             bitwise             bitwise
//   rmsnorm (3)         bitwise      7.2e-07 (4% tol)    bitwise             7.2e-07 (4% tol)
//   attention (9)       bitwise      4.8e-07 (15% tol)   bitwise             6.2e-07 (49% tol) *
//   // clang-format on
//
// bitwise: every output has cpu-ref's bits; "7.2e-07 (4% tol)": the largest
// |got - cpu-ref| of the op's shapes, and the largest share of the allowed
// difference any element used; "*": the backend refused some shapes (listed
// under the table, with its reason); "not offered": the registry has no such
// backend here. Every cell checks every shape (CHECK, not REQUIRE), so the
// table shows every failing cell, and each failure names the op, the backend,
// the shape, the output, the first bad index and both values.
//
// A second case reads the Backend class from src/core/backend.h and fails when
// a virtual method is neither a row of the table nor listed as no op, with why.
//
// Left out on purpose: the paths inside one backend (cpu's GEMM contract, its
// decode-from-the-pool and key-mirror paths, threads; gpu's tile choices, each
// flash head dim, timing): the per-backend files check those deeper
// (tests/engine/test_cpu_fast_paths.cpp, test_cpu_gemm.cpp, test_threads.cpp,
// tests/gpu/). Shapes are small: the GPU backends run emulated (kernels/simt)
// on a machine without a CUDA device. Backends come from the registry by name
// only; this file includes no backend's or kernel's header.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "backend_op_rows.h"
#include "core/backend.h"
#include "runtime/registry.h"
#include "test_util.h"

using namespace plab;
using namespace plab::test;
using namespace plab::test::backend_ops;

namespace {

// The virtual methods of Backend that are no row of the table, and why.
const std::map<std::string, std::string> kNotOps = {
    {"name", "metadata: printed in the table's header"},
    {"is_reference", "metadata: checked against the registry name (-ref) in every column"},
    {"alloc", "memory: every cell allocates its inputs and outputs"},
    {"release", "memory: every cell releases them (DeviceArray)"},
    {"upload", "memory: every cell uploads its inputs"},
    {"download", "memory: every cell downloads its outputs"},
    {"fill", "memory: every cell poisons its outputs with fill(NaN)"},
    {"synchronize", "waits for queued work; download waits too"},
    {"prepare_weight", "a layout hint, results must not depend on it: the matmul row calls it"},
    {"prepare_kv_pool",
     "a layout hint, results must not depend on it: the kv_append and attention rows call it"},
    {"attention_tile_counts",
     "instrumentation of the fast kernels (test_cpu_fast_paths, test_gpu_flash)"},
    {"reset_attention_tile_counts", "instrumentation (as attention_tile_counts)"},
    {"times_device_ops", "device timing (tests/gpu/test_gpu_timing.cpp)"},
    {"set_device_op_timing", "device timing (tests/gpu/test_gpu_timing.cpp)"},
    {"take_device_op_times", "device timing (tests/gpu/test_gpu_timing.cpp)"},
    {"begin_step_graph",
     "how a step's launches run (CUDA graphs), not what they compute: "
     "tests/gpu/test_step_graph.cpp compares a graph's bits with launches'"},
    {"end_step_graph", "step graphs (as begin_step_graph)"},
    {"cancel_step_graph", "step graphs (as begin_step_graph)"},
    {"step_graph_counts", "step graphs (as begin_step_graph)"},
};

// ---- comparing one cell ---------------------------------------------------------

// What one backend's outputs of one op were, over all its shapes.
struct Cell {
    bool offered = false;
    std::string backend;  // its name() ("gpu (emulated)")
    int ran = 0;          // shapes run and compared
    std::vector<std::string> refused;
    bool bitwise = true;
    double max_err = 0;    // max |got - cpu-ref| where the bits differ
    double max_share = 0;  // max |got - cpu-ref| / allowed
    int failed = 0;        // shapes that failed
    int shapes = 0;        // shapes of the op

    std::string text() const {
        if (!offered) return "not offered";
        std::string t;
        if (failed > 0) {
            t = "FAIL (" + str(failed) + " of " + str(shapes) + " shapes)";
        } else if (ran == 0) {
            t = "refused all";
        } else if (bitwise) {
            t = "bitwise";
        } else {
            char buf[48];
            std::snprintf(buf, sizeof buf, "%.1e (%d%% tol)", max_err,
                          int(std::ceil(100 * max_share)));
            t = buf;
        }
        return refused.empty() ? t : t + " *";
    }
};

// The tolerance of a fast backend for this case, by its registry name.
const Tolerance* fast_tolerance(const OpCase& c, const std::string& backend) {
    if (backend == "cpu") return &c.cpu;
    if (backend == "gpu") return &c.gpu;
    return nullptr;
}

// A float with enough digits to tell neighbours apart, and its bits.
std::string exact_text(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.9g (0x%08x)", double(f), u);
    return buf;
}

// Compares one output with cpu-ref's: identical bits always pass; otherwise
// both finite and within the tolerance (none: bitwise). Returns whether it
// passed; a failure is reported (FAIL_CHECK) with everything needed to find it.
bool compare(const std::string& where, const Tensor& got, const Tensor& want, const Tolerance& tol,
             Cell& cell) {
    if (got.values.size() != want.values.size()) {
        FAIL_CHECK(where << ", " << want.name << ": " << got.values.size() << " values, cpu-ref "
                         << want.values.size());
        return false;
    }
    for (std::size_t i = 0; i < got.values.size(); ++i) {
        const float a = got.values[i], e = want.values[i];
        if (std::memcmp(&a, &e, sizeof a) == 0) continue;
        cell.bitwise = false;
        const double diff = std::fabs(double(a) - double(e));
        const double allowed = tol.atol + tol.rtol * std::fabs(double(e));
        if (std::isfinite(diff)) {
            cell.max_err = std::max(cell.max_err, diff);
            cell.max_share = std::max(cell.max_share, allowed > 0 ? diff / allowed : INFINITY);
        }
        if (tol.bitwise() || !(diff <= allowed)) {
            if (tol.bitwise()) {
                FAIL_CHECK(where << ", " << want.name << ": first difference at element " << i
                                 << ": got " << exact_text(a) << ", cpu-ref " << exact_text(e)
                                 << "; bitwise required: " << tol.why);
            } else {
                FAIL_CHECK(where << ", " << want.name << ": first bad element " << i << ": got "
                                 << exact_text(a) << ", cpu-ref " << exact_text(e) << ", |diff| "
                                 << diff << " > allowed " << allowed << " = " << tol.atol << " + "
                                 << tol.rtol << "·|cpu-ref| (" << tol.why << ")");
            }
            return false;
        }
    }
    return true;
}

// The oracle's own output must be worth comparing with: not all zero, and
// NaN only where NaN marks slots the op leaves alone.
void check_oracle(const std::string& where, const Tensor& t) {
    bool any_nonzero = false, any_nan = false;
    for (float f : t.values) {
        any_nonzero = any_nonzero || (f != 0.0f && !std::isnan(f));
        any_nan = any_nan || std::isnan(f);
    }
    if (!any_nonzero && !t.index)
        FAIL_CHECK(where << ", " << t.name << ": cpu-ref's output is all zero");
    if (any_nan && !t.holds_nan)
        FAIL_CHECK(where << ", " << t.name << ": cpu-ref's output holds NaN");
}

// Does this error say the backend cannot run this head dim (and nothing else)?
bool refuses_head_dim(const std::string& message, int head_dim) {
    return head_dim > 0 && message.find("head_dim") != std::string::npos &&
           message.find(str(head_dim)) != std::string::npos;
}

Cell run_cell(const OpRow& row, const std::string& name, Backend& b,
              const std::vector<Outputs>& oracle) {
    Cell cell;
    cell.offered = true;
    cell.backend = b.name();
    cell.shapes = int(row.cases.size());
    for (std::size_t ci = 0; ci < row.cases.size(); ++ci) {
        const OpCase& c = row.cases[ci];
        const std::string where = row.op + " on " + b.name() + ", " + c.shape;
        const Tolerance* tol = b.is_reference() ? &kReference : fast_tolerance(c, name);
        if (tol == nullptr) {
            FAIL_CHECK(where << ": no tolerance stated for the fast backend '" << name
                             << "': give the OpCase one, with its reason");
            ++cell.failed;
            continue;
        }
        Outputs got;
        try {
            got = c.run(b);
        } catch (const std::exception& e) {
            if (!b.is_reference() && refuses_head_dim(e.what(), c.head_dim)) {
                cell.refused.push_back(c.shape + ": " + e.what());
                continue;
            }
            FAIL_CHECK(where << ": threw: " << e.what());
            ++cell.failed;
            continue;
        }
        ++cell.ran;
        const Outputs& want = oracle[ci];
        if (got.size() != want.size()) {
            FAIL_CHECK(where << ": " << got.size() << " outputs, cpu-ref " << want.size());
            ++cell.failed;
            continue;
        }
        bool ok = true;
        for (std::size_t t = 0; t < want.size(); ++t) {
            ok = compare(where, got[t], want[t], want[t].exact ? kExactOutput : *tol, cell) && ok;
        }
        if (!ok) ++cell.failed;
    }
    // A backend may refuse a head dim, never every shape of an op.
    if (cell.ran == 0)
        FAIL_CHECK(row.op << " on " << b.name() << ": ran none of its " << row.cases.size()
                          << " shapes");
    return cell;
}

std::string pad(const std::string& s, std::size_t width) {
    return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

std::string tolerance_text(const Tolerance& t) {
    if (t.bitwise()) return "bitwise";
    char buf[64];
    if (t.rtol == 0)
        std::snprintf(buf, sizeof buf, "%.1e", t.atol);
    else
        std::snprintf(buf, sizeof buf, "%.0e + %.0e·|ref|", t.atol, t.rtol);
    return buf;
}

}  // namespace

TEST_CASE("backend ops: every op on every backend against cpu-ref, as one table",
          "[backend_ops][gpu]") {
    const std::vector<OpRow> rows = op_rows();
    // The project's four backends in this order, then any other the registry offers.
    std::vector<std::string> columns = {"cpu-ref", "cpu", "gpu-ref", "gpu"};
    const std::vector<std::string> offered = backend_names();
    for (const std::string& n : offered)
        if (std::find(columns.begin(), columns.end(), n) == columns.end()) columns.push_back(n);
    std::map<std::string, std::unique_ptr<Backend>> backends;
    for (const std::string& n : offered) {
        backends[n] = make_backend(n);
        INFO("backend " << n << " (" << backends[n]->name() << ")");
        // The reference backends, and only they, promise cpu-ref's bits.
        CHECK(backends[n]->is_reference() == (n.size() > 4 && n.ends_with("-ref")));
    }

    // 1. The oracle: cpu-ref on every shape, its outputs worth comparing.
    auto cpu_ref = make_backend("cpu-ref");
    std::vector<std::vector<Outputs>> oracle(rows.size());
    for (std::size_t r = 0; r < rows.size(); ++r) {
        for (const OpCase& c : rows[r].cases) {
            oracle[r].push_back(c.run(*cpu_ref));
            for (const Tensor& t : oracle[r].back()) check_oracle(rows[r].op + ", " + c.shape, t);
        }
    }

    // 2. Every cell: the op's shapes on one backend (cpu-ref too: a second
    //    instance, which must repeat its bits).
    std::vector<std::vector<Cell>> cells(rows.size(), std::vector<Cell>(columns.size()));
    for (std::size_t r = 0; r < rows.size(); ++r) {
        for (std::size_t col = 0; col < columns.size(); ++col) {
            const auto it = backends.find(columns[col]);
            if (it == backends.end()) continue;  // not offered
            cells[r][col] = run_cell(rows[r], columns[col], *it->second, oracle[r]);
        }
    }

    // 3. The table, once.
    std::ostringstream out;
    out << "\nEvery Backend op on every backend against cpu-ref (GPU backends: "
        << gpu_form_description() << ")\n\n";
    const std::size_t op_width = 20, width = 22;
    out << pad("op (shapes)", op_width);
    for (std::size_t col = 0; col < columns.size(); ++col) {
        const auto it = backends.find(columns[col]);
        out << pad(it == backends.end() ? columns[col] : it->second->name(), width);
    }
    out << "\n";
    for (std::size_t r = 0; r < rows.size(); ++r) {
        out << pad(rows[r].op + " (" + str(int(rows[r].cases.size())) + ")", op_width);
        for (const Cell& cell : cells[r]) out << pad(cell.text(), width);
        out << "\n";
    }
    out << "\nbitwise: cpu-ref's bits on every shape; \"7.2e-07 (4% tol)\": the largest "
           "|got - cpu-ref|, and the largest share of the tolerance an element used.\n";
    bool any_refused = false;
    for (std::size_t r = 0; r < rows.size(); ++r) {
        for (const Cell& cell : cells[r]) {
            for (const std::string& why : cell.refused) {
                if (!any_refused) out << "* refused shapes (the other shapes of the op ran):\n";
                any_refused = true;
                out << "  " << rows[r].op << " on " << cell.backend << ", " << why << "\n";
            }
        }
    }
    out << "\nTolerances of the fast backends (the reference ones: bitwise):\n";
    for (const OpRow& row : rows) {
        const auto line = [&](const std::string& who, const Tolerance& t) {
            bool per_shape = false;  // a bound computed from each shape's inputs
            for (const OpCase& c : row.cases)
                per_shape = per_shape || fast_tolerance(c, who.substr(0, 3))->atol != t.atol;
            out << "  " << pad(row.op, op_width - 2) << pad(who, 9)
                << (per_shape ? "per shape, e.g. " : "") << tolerance_text(t) << ": " << t.why
                << "\n";
        };
        const OpCase& first = row.cases.front();
        if (first.cpu.why == first.gpu.why && first.cpu.atol == first.gpu.atol &&
            first.cpu.rtol == first.gpu.rtol) {
            line("cpu, gpu", first.cpu);
        } else {
            line("cpu", first.cpu);
            line("gpu", first.gpu);
        }
    }
    std::cout << out.str() << std::flush;

    // One assertion for the whole table (each failing shape was reported above).
    std::string failed_cells;
    for (std::size_t r = 0; r < rows.size(); ++r)
        for (const Cell& cell : cells[r])
            if (cell.offered && (cell.failed > 0 || cell.ran == 0))
                failed_cells += " " + rows[r].op + " on " + cell.backend + ";";
    INFO("failed cells:" << failed_cells);
    CHECK(failed_cells.empty());
}

TEST_CASE("backend ops: the table has a row for every op the Backend interface declares",
          "[backend_ops]") {
    // The virtual methods of class Backend, read from its header (comments
    // dropped): the name before the '(' of each `virtual ... (`.
    const std::string header =
        read_bytes(std::filesystem::path(PLAB_TESTS_DIR) / ".." / "src" / "core" / "backend.h");
    REQUIRE_FALSE(header.empty());
    const std::size_t begin = header.find("class Backend {");
    REQUIRE(begin != std::string::npos);
    const std::size_t end = header.find("\n};", begin);
    REQUIRE(end != std::string::npos);
    const std::string body =
        std::regex_replace(header.substr(begin, end - begin), std::regex("//[^\n]*"), "");
    std::set<std::string> declared;
    const std::regex virtual_method(R"(virtual\s+[^(;]*?(~?\w+)\s*\()");
    for (auto it = std::sregex_iterator(body.begin(), body.end(), virtual_method);
         it != std::sregex_iterator(); ++it) {
        const std::string name = (*it)[1];
        if (name[0] != '~') declared.insert(name);
    }
    // Guards the reading itself: Backend has had 30 virtual methods since issue 14.
    REQUIRE(declared.size() >= 25);

    std::set<std::string> rows;
    for (const OpRow& row : op_rows()) {
        INFO("row " << row.op);
        CHECK(rows.insert(row.op).second);  // one row per op
        CHECK_FALSE(row.cases.empty());
        CHECK(kNotOps.count(row.op) == 0);
    }
    for (const std::string& name : declared) {
        INFO("Backend::" << name
                         << " is neither a row of the table in tests/engine/test_backend_ops.cpp "
                            "nor in its kNotOps: a new op gets a row (seeded inputs, odd shapes, "
                            "outputs poisoned with NaN, a tolerance with its reason per fast "
                            "backend); a method that computes nothing goes in kNotOps, with why");
        CHECK((rows.count(name) + kNotOps.count(name)) == 1);
    }
    for (const std::string& name : rows) {
        INFO("the table's row " << name << " names no virtual method of Backend");
        CHECK(declared.count(name) == 1);
    }
    for (const auto& [name, why] : kNotOps) {
        INFO("kNotOps lists " << name << ", which Backend does not declare");
        CHECK(declared.count(name) == 1);
    }
    CHECK(declared.size() == rows.size() + kNotOps.size());
}
