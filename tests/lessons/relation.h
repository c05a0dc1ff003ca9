// Relation checks of an executable lesson: "<!-- check: EXPR OP EXPR [within
// EXPR | within EXPR%] -->", evaluated over the numbers the lesson's commands
// printed (see lesson_runner.cpp for the whole format).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace plab::lessons {

// A captured number, by the name its "{{name}}" marker gave it.
using Captures = std::map<std::string, double>;

// "" when the relation holds, else why not (with the values it used). A
// malformed relation or a name nobody captured throws std::runtime_error.
std::string check_relation(const std::string& relation, const Captures& captures);

// The value of one expression (numbers, names, + - * / and parentheses);
// throws std::runtime_error when it does not parse or names an unknown value.
double evaluate_expression(const std::string& expr, const Captures& captures);

// The captured names an expression or relation uses ("within" is not a name).
std::vector<std::string> names_in(const std::string& text);

}  // namespace plab::lessons
