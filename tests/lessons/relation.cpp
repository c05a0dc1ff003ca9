// Relation checks (relation.h): a small recursive-descent evaluator over the
// captured numbers.
#include "relation.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace plab::lessons {

namespace {

// A small recursive-descent evaluator: expr := term (('+'|'-') term)*,
// term := factor (('*'|'/') factor)*, factor := number | name | '-' factor |
// '(' expr ')'. Names are looked up in the captures; `used` records each name
// and value, so a failed check prints what it compared.
class Expr {
public:
    Expr(const std::string& text, const Captures& captures, std::string& used)
        : s_(text), captures_(captures), used_(used) {}

    double parse_all(std::size_t end) {
        end_ = end;
        const double v = expr();
        skip();
        if (i_ != end_) fail("unexpected '" + s_.substr(i_, end_ - i_) + "'");
        return v;
    }

private:
    [[noreturn]] void fail(const std::string& why) const {
        throw std::runtime_error("bad check expression \"" + s_.substr(0, end_) + "\": " + why);
    }
    void skip() {
        while (i_ < end_ && s_[i_] == ' ') ++i_;
    }
    double expr() {
        double v = term();
        for (skip(); i_ < end_ && (s_[i_] == '+' || s_[i_] == '-'); skip()) {
            const char op = s_[i_++];
            const double r = term();
            v = op == '+' ? v + r : v - r;
        }
        return v;
    }
    double term() {
        double v = factor();
        for (skip(); i_ < end_ && (s_[i_] == '*' || s_[i_] == '/'); skip()) {
            const char op = s_[i_++];
            const double r = factor();
            v = op == '*' ? v * r : v / r;
        }
        return v;
    }
    double factor() {
        skip();
        if (i_ >= end_) fail("a number, a name or '(' expected at the end");
        const char c = s_[i_];
        if (c == '-') {
            ++i_;
            return -factor();
        }
        if (c == '(') {
            ++i_;
            const double v = expr();
            skip();
            if (i_ >= end_ || s_[i_] != ')') fail("')' expected");
            ++i_;
            return v;
        }
        if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
            char* stop = nullptr;
            const double v = std::strtod(s_.c_str() + i_, &stop);
            i_ = std::size_t(stop - s_.c_str());
            return v;
        }
        if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
            const std::size_t start = i_;
            while (i_ < end_ && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_'))
                ++i_;
            const std::string name = s_.substr(start, i_ - start);
            const auto it = captures_.find(name);
            if (it == captures_.end()) {
                std::string known;
                for (const auto& [k, v] : captures_) known += (known.empty() ? "" : ", ") + k;
                throw std::runtime_error("check names '" + name +
                                         "', which no command above captured (captured: " +
                                         (known.empty() ? "nothing" : known) + ")");
            }
            std::ostringstream os;
            os.precision(10);
            os << name << " = " << it->second;
            if (used_.find(os.str()) == std::string::npos)
                used_ += (used_.empty() ? "" : ", ") + os.str();
            return it->second;
        }
        fail(std::string("unexpected '") + c + "'");
    }

    const std::string& s_;
    const Captures& captures_;
    std::string& used_;
    std::size_t i_ = 0, end_ = 0;
};

double evaluate(const std::string& text, const Captures& captures, std::string& used) {
    Expr e(text, captures, used);
    return e.parse_all(text.size());
}

}  // namespace

double evaluate_expression(const std::string& expr, const Captures& captures) {
    std::string used;
    return evaluate(expr, captures, used);
}

std::vector<std::string> names_in(const std::string& text) {
    static const std::regex name("[A-Za-z_][A-Za-z_0-9]*");
    std::vector<std::string> out;
    for (std::sregex_iterator it(text.begin(), text.end(), name), end; it != end; ++it) {
        const std::size_t at = std::size_t(it->position());
        // A name, not the exponent of a number like 1e-5.
        if (at > 0 &&
            (std::isdigit(static_cast<unsigned char>(text[at - 1])) || text[at - 1] == '.'))
            continue;
        if (it->str() != "within") out.push_back(it->str());
    }
    return out;
}

// Evaluates "EXPR OP EXPR [within EXPR | within EXPR%]"; returns "" when it holds,
// else why not (with the values it used).
std::string check_relation(const std::string& relation, const Captures& captures) {
    static const std::regex form(
        "\\s*(.+?)\\s*(==|!=|<=|>=|<|>)\\s*(.+?)(?:\\s+within\\s+(.+?)\\s*(%?))?\\s*");
    std::smatch m;
    if (!std::regex_match(relation, m, form)) {
        throw std::runtime_error("bad check \"" + relation +
                                 "\": expected EXPR OP EXPR [within EXPR | within EXPR%], "
                                 "OP one of == != < <= > >=");
    }
    std::string used;
    const double l = evaluate(m[1].str(), captures, used);
    const double r = evaluate(m[3].str(), captures, used);
    const std::string op = m[2].str();
    double tol = 0;
    if (m[4].matched) {
        if (op != "==")
            throw std::runtime_error("bad check \"" + relation + "\": within goes with ==");
        tol = evaluate(m[4].str(), captures, used);
        if (m[5].str() == "%") tol = tol / 100 * std::fabs(r);
    }
    const bool holds = op == "=="   ? std::fabs(l - r) <= tol
                       : op == "!=" ? l != r
                       : op == "<"  ? l < r
                       : op == "<=" ? l <= r
                       : op == ">"  ? l > r
                                    : l >= r;
    if (holds) return "";
    std::ostringstream os;
    os.precision(10);
    os << "check failed: " << relation << "\n    left " << l << ", right " << r;
    if (tol > 0) os << ", allowed difference " << tol;
    if (!used.empty()) os << "\n    with " << used;
    return os.str();
}

}  // namespace plab::lessons
