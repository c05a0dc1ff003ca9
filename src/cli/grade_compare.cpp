// `plab grade`: comparing what the student's functions returned with the
// engine's reference tensors, and naming the first failure of each check: the
// case, the index (by the names of its axes), expected vs got, and a hint.
#include <cmath>
#include <cstdio>
#include <sstream>

#include "cli/grade.h"

namespace plab::cli::grade {
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

// Grades one expectation; "" when it holds, else the failure's detail and hint.
bool grade_one(const Expectation& e, const nlohmann::json& call_result, std::string& detail,
               std::string& hint, const std::string& check_hint) {
    if (call_result.contains("error")) {
        detail = call_result["error"].get<std::string>();
        // A Python starter raises NotImplementedError; a C++ starter returns -1,
        // which the assignment's cpp_adapter.py raises as NotImplementedError.
        if (detail.find("NotImplementedError") == std::string::npos)
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
    for (const Mistake& m : e.mistakes) {
        if (m.value.shape == got.shape && first_bad(got, e, m.value) < 0) {
            hint = m.hint;
            return false;
        }
    }
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
                       std::string& detail, std::string& hint, const std::string& check_hint) {
    if (e.same_as_call < 0)
        return grade_one(e, root_cause(c, calls, e.call), detail, hint, check_hint);
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
    return grade_one(own, root_cause(c, calls, e.call), detail, hint, check_hint);
}

}  // namespace compare_detail

std::vector<CheckResult> grade_checks(const std::vector<Check>& checks,
                                      const nlohmann::json& reply) {
    std::vector<CheckResult> out;
    std::size_t case_index = 0;
    const bool timed_out = reply.contains("timeout");
    for (const Check& check : checks) {
        CheckResult r;
        r.name = check.name;
        bool shown_diagnosed = false;  // the failure in r has a mistake's own hint
        for (const Case& c : check.cases) {
            ++r.cases;
            bool ok = true;
            for (const Expectation& e : c.expect) {
                std::string detail, hint;
                if (timed_out) {
                    ok = false;
                    detail = "no result: the time limit of " +
                             std::to_string(reply["timeout"].get<int>()) + " s ran out";
                    hint = "an endless loop, or a Python loop over every element? (--timeout S)";
                } else {
                    const nlohmann::json& calls = reply["results"][case_index];
                    ok = compare_detail::grade_one_in_case(e, c, calls, detail, hint, check.hint);
                }
                if (ok) continue;
                const bool first = r.failure_detail.empty();
                const bool diagnosed = hint != check.hint;
                if (first || (diagnosed && !shown_diagnosed)) {
                    r.failure_where = e.where;
                    r.failure_what = e.what;
                    r.failure_detail = detail;
                    r.hint = hint;
                    r.failure_is_first = first;
                    shown_diagnosed = diagnosed;
                }
                break;
            }
            r.passed += ok ? 1 : 0;
            ++case_index;
        }
        out.push_back(r);
    }
    return out;
}

}  // namespace plab::cli::grade
