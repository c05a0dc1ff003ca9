// `plab grade`: comparing what the student's functions returned with the
// engine's reference tensors, and naming the first failure of each check: the
// case, the index (by the names of its axes), expected vs got, and a hint.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "grade/grade.h"

namespace plab::grade {
namespace compare_detail {

double number(const nlohmann::json& v) {
    if (v.is_number()) return v.get<double>();
    if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
    const std::string s = v.is_string() ? v.get<std::string>() : "nan";
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
    return NAN;
}

// The harness's encoding of an array; false (and why) for anything else.
bool parse_tensor(const nlohmann::json& v, Tensor& t, std::string& why) {
    if (v.is_null()) {
        why = "your function returned None";
        return false;
    }
    if (v.is_array()) {
        why = "your function returned a tuple of " + std::to_string(v.size()) +
              " where one array was expected";
        return false;
    }
    t.shape = v["shape"].get<std::vector<int>>();
    t.data.clear();
    for (const auto& x : v["array"]) t.data.push_back(number(x));
    return true;
}

std::string shape_text(const std::vector<int>& shape) {
    std::string s = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + (shape.size() == 1 ? ",)" : ")");
}

std::string value_text(double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%.6g", x);
    return b;
}

bool close(double got, double expected, double atol, double rtol) {
    if (std::isnan(expected)) return true;  // not checked
    return std::fabs(got - expected) <= atol + rtol * std::fabs(expected);
}

// Index of the first element out of tolerance, or -1.
long first_bad(const Tensor& got, const Expectation& e, const Tensor& expected) {
    for (std::size_t i = 0; i < expected.size(); ++i)
        if (!close(got.data[i], expected.data[i], e.atol, e.rtol)) return static_cast<long>(i);
    return -1;
}

std::string index_text(long flat, const std::vector<int>& shape,
                       const std::vector<std::string>& axes) {
    std::vector<long> idx(shape.size());
    for (std::size_t d = shape.size(); d-- > 0;) {
        idx[d] = flat % shape[d];
        flat /= shape[d];
    }
    std::string s;
    for (std::size_t d = 0; d < idx.size(); ++d) {
        const std::string axis = d < axes.size() ? axes[d] : "index";
        s += (d ? ", " : "") + axis + " " + std::to_string(idx[d]);
    }
    return s.empty() ? "the value" : s;
}

// What to look at when a case ran into one of the sandbox's limits (the
// error itself says which limit and its value).
std::string limit_hint(const std::string& limit, const std::string& detail,
                       const std::string& check_hint) {
    if (limit == "timeout" || limit == "total-timeout" || limit == "cpu")
        return "an endless loop, or a Python loop over every element? (each check has --timeout "
               "S seconds)";
    if (limit == "memory") return "an array far larger than the case needs? (--memory MIB)";
    if (limit == "output") return "print less: the grader keeps --output MIB of what you print";
    if (limit == "processes") return "the assignment needs no processes or threads of your own";
    if (limit == "network" || limit == "files")
        return "the assignment needs no network and no files: compute from the arguments";
    if (limit == "sanitizer" && (detail.find("null pointer") != std::string::npos ||
                                 detail.find("SEGV") != std::string::npos))
        return "a pointer that points at nothing: a null pointer, or an index far out of range";
    if (limit == "sanitizer")
        return "a read or write outside an array: check each loop's bounds (< n, not <= n)";
    return check_hint;
}

// Grades one expectation; "" when it holds, else the failure's detail and hint.
bool grade_one(const Expectation& e, const nlohmann::json& call_result, std::string& detail,
               std::string& hint, const std::string& check_hint,
               std::vector<std::string>* explained_by = nullptr) {
    if (call_result.contains("error")) {
        detail = call_result["error"].get<std::string>();
        if (call_result.contains("limit")) {
            hint = limit_hint(call_result["limit"].get<std::string>(), detail, check_hint);
            return false;
        }
        // A Python starter raises NotImplementedError; a C++ starter returns -1,
        // which the assignment's cpp_adapter.py raises as NotImplementedError.
        if (detail.find("race on shared tile") != std::string::npos)
            hint =
                "two threads touched one element of a shared tile with no __syncthreads "
                "between: wait after loading a tile (before anyone reads it) and after using "
                "it (before the next load overwrites it)";
        else if (detail.find("indexes shared tile") != std::string::npos)
            hint =
                "an index outside a shared tile: check the load loop's bounds (n * Dh "
                "elements) and the tile's size";
        else if (detail.find("NotImplementedError") == std::string::npos)
            hint = check_hint;
        else if (detail.find("returned -1") != std::string::npos)
            hint = "fill in this function: it still returns -1, as the starter does";
        else
            hint = "fill in this function: it still raises NotImplementedError";
        return false;
    }
    nlohmann::json v = call_result["value"];
    if (e.part >= 0) {
        if (!v.is_array() || static_cast<int>(v.size()) <= e.part) {
            detail = "expected a tuple with at least " + std::to_string(e.part + 1) + " elements";
            hint = check_hint;
            return false;
        }
        v = v[e.part];
    }
    Tensor got;
    std::string why;
    if (!parse_tensor(v, got, why)) {
        detail = why;
        hint = check_hint;
        return false;
    }
    if (e.judge) {
        detail = e.judge(got, e.expected);
        if (detail.empty()) return true;
    } else if (got.shape != e.expected.shape) {
        detail = "shape " + shape_text(got.shape) + ", expected " + shape_text(e.expected.shape);
    } else {
        const long bad = first_bad(got, e, e.expected);
        if (bad < 0) return true;
        detail =
            (e.expected.shape.empty() ? ""
                                      : "at " + index_text(bad, e.expected.shape, e.axes) + ": ") +
            "expected " + value_text(e.expected.data[bad]) + ", got " + value_text(got.data[bad]);
    }
    // Every known mistake the answer matches (several can: at T=2 "sees the
    // next key" and "sees every key" are one mask); the first gives this
    // case's own hint, grade_checks weighs them across all checks.
    for (const Mistake& m : e.mistakes) {
        if (m.value.shape == got.shape && first_bad(got, e, m.value) < 0) {
            if (hint.empty()) hint = m.hint;
            if (explained_by != nullptr) explained_by->push_back(m.hint);
        }
    }
    if (!hint.empty()) return false;
    hint = e.diagnose ? e.diagnose(got) : "";
    if (hint.empty()) hint = check_hint;
    return false;
}

// The result of call `i`, or, when an earlier call of the case failed and this
// one was skipped, that earlier call's error, named.
nlohmann::json root_cause(const Case& c, const nlohmann::json& calls, int i) {
    if (!calls[i].contains("error")) return calls[i];
    for (int j = 0; j < i; ++j) {
        if (calls[j].contains("error"))
            return {{"error", c.calls[j]["fn"].get<std::string>() + "() raised " +
                                  calls[j]["error"].get<std::string>()}};
    }
    return calls[i];
}

// Grades `e` within its case: a reference that is another call's result is
// read from the student's answers first (its failure is this one's).
bool grade_one_in_case(const Expectation& e, const Case& c, const nlohmann::json& calls,
                       std::string& detail, std::string& hint, const std::string& check_hint,
                       std::vector<std::string>* explained_by) {
    if (e.same_as_call < 0)
        return grade_one(e, root_cause(c, calls, e.call), detail, hint, check_hint, explained_by);
    const nlohmann::json reference = root_cause(c, calls, e.same_as_call);
    Expectation own = e;
    std::string why;
    if (reference.contains("error") || !parse_tensor(reference["value"], own.expected, why)) {
        return grade_one(own,
                         reference.contains("error") ? reference : nlohmann::json{{"error", why}},
                         detail, hint, check_hint);
    }
    // A NaN in an expected tensor means "not checked": a reference of NaNs
    // would pass anything.
    for (double x : own.expected.data) {
        if (std::isnan(x)) {
            detail = "your reference answer (" + c.calls[e.same_as_call]["fn"].get<std::string>() +
                     ") has NaN";
            hint = "your output has inf or NaN: subtract the row's max before exp";
            return false;
        }
    }
    return grade_one(own, root_cause(c, calls, e.call), detail, hint, check_hint, explained_by);
}

// The limit a case's calls ran into, "" if none.
std::string limit_of(const nlohmann::json& calls) {
    for (const nlohmann::json& call : calls)
        if (call.contains("limit")) return call["limit"].get<std::string>();
    return "";
}

}  // namespace compare_detail

namespace {

// One case's first failing expectation, before the hints are chosen.
struct Failure {
    std::string where, what, detail, hint;
    std::vector<std::string> explained_by;  // hints of every known mistake the answer matches
};

// The failure a check shows and its hint: the case whose known mistake explains
// the most failing cases across all checks (so one mistake is named as itself
// in every check it breaks), else the first failure a diagnosis explains, else
// the first failure.
std::size_t shown_failure(const std::vector<Failure>& failures, const std::string& check_hint,
                          const std::map<std::string, int>& explains, std::string& hint) {
    int best = 0;
    std::size_t shown = 0;
    for (std::size_t i = 0; i < failures.size(); ++i)
        for (const std::string& h : failures[i].explained_by)
            if (explains.at(h) > best) {
                best = explains.at(h);
                shown = i;
                hint = h;
            }
    if (best > 0) return shown;
    for (std::size_t i = 0; i < failures.size(); ++i)
        if (failures[i].hint != check_hint) {
            hint = failures[i].hint;
            return i;
        }
    hint = failures[0].hint;
    return 0;
}

}  // namespace

std::vector<CheckResult> grade_checks(const std::vector<Check>& checks,
                                      const nlohmann::json& reply) {
    std::vector<CheckResult> out;
    std::vector<std::vector<Failure>> failures(checks.size());
    std::map<std::string, int> explains;  // known mistake's hint -> failing cases it explains
    std::size_t case_index = 0;
    for (std::size_t k = 0; k < checks.size(); ++k) {
        const Check& check = checks[k];
        CheckResult r;
        r.name = check.name;
        for (const Case& c : check.cases) {
            ++r.cases;
            bool ok = true;
            for (const Expectation& e : c.expect) {
                Failure f{e.where, e.what, "", "", {}};
                const nlohmann::json& calls = reply["results"][case_index];
                ok = compare_detail::grade_one_in_case(e, c, calls, f.detail, f.hint, check.hint,
                                                       &f.explained_by);
                if (ok) continue;
                if (r.limit.empty()) r.limit = compare_detail::limit_of(calls);
                std::sort(f.explained_by.begin(), f.explained_by.end());
                f.explained_by.erase(std::unique(f.explained_by.begin(), f.explained_by.end()),
                                     f.explained_by.end());
                for (const std::string& h : f.explained_by) ++explains[h];
                failures[k].push_back(std::move(f));
                break;
            }
            r.passed += ok ? 1 : 0;
            ++case_index;
        }
        out.push_back(r);
    }
    for (std::size_t k = 0; k < checks.size(); ++k) {
        if (failures[k].empty()) continue;
        CheckResult& r = out[k];
        const std::size_t i = shown_failure(failures[k], checks[k].hint, explains, r.hint);
        r.failure_where = failures[k][i].where;
        r.failure_what = failures[k][i].what;
        r.failure_detail = failures[k][i].detail;
        r.failure_is_first = i == 0;
    }
    return out;
}

}  // namespace plab::grade
