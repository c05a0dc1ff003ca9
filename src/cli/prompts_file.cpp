#include "cli/prompts_file.h"

#include <climits>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "core/error.h"

namespace plab::cli {
namespace {

bool is_blank(const std::string& line) {
    return line.find_first_not_of(" \t") == std::string::npos;
}

// nlohmann's parse message without its "[json.exception...] parse error at
// line 1, column 7: " head: each line is parsed alone, so its "line 1" would
// mislead; the column is reported from the error's byte offset instead.
std::string json_reason(const nlohmann::json::parse_error& e) {
    const std::string what = e.what();
    const std::size_t column = what.find("column");
    const std::size_t colon = what.find(": ", column == std::string::npos ? 0 : column);
    return colon == std::string::npos ? what : what.substr(colon + 2);
}

// "a string", "an array", "null": the JSON type of a value, for a message.
std::string a_type(const nlohmann::json& v) {
    const std::string t = v.type_name();
    if (v.is_null()) return t;
    return (t == "array" || t == "object" ? "an " : "a ") + t;
}

PromptLine parse_json_line(const std::string& line, int n, const std::string& path) {
    static const char* kExample =
        R"(; write one object per line, e.g. {"prompt": "Once upon a time", "max_new_tokens": 8})";
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
        PLAB_CHECK(false, path << " line " << n << ": malformed JSON at column " << e.byte << " ("
                               << json_reason(e) << ")" << kExample);
    }
    PLAB_CHECK(j.is_object(),
               path << " line " << n << ": " << a_type(j) << ", not an object" << kExample);
    PromptLine p;
    p.line = n;
    for (const auto& [key, value] : j.items()) {
        PLAB_CHECK(key == "prompt" || key == "max_new_tokens",
                   path << " line " << n << ": unknown key \"" << key
                        << "\"; the keys are \"prompt\" (required) and \"max_new_tokens\"");
    }
    PLAB_CHECK(j.contains("prompt") && j["prompt"].is_string(),
               path << " line " << n << ": "
                    << (j.contains("prompt") ? "\"prompt\" is " + a_type(j["prompt"])
                                             : std::string("no \"prompt\" key"))
                    << "; give the prompt as a JSON string" << kExample);
    p.text = j["prompt"].get<std::string>();
    PLAB_CHECK(!p.text.empty(), path << " line " << n << ": \"prompt\" is an empty string; "
                                     << "give the text the request starts from");
    if (j.contains("max_new_tokens")) {
        const nlohmann::json& m = j["max_new_tokens"];
        // An unsigned JSON integer above INT64_MAX is refused by is_number_unsigned
        // first: read as int64 it would wrap to a negative number and mislead.
        const bool fits = m.is_number_integer() &&
                          (!m.is_number_unsigned() || m.get<std::uint64_t>() <= INT_MAX) &&
                          m.get<std::int64_t>() >= 1 && m.get<std::int64_t>() <= INT_MAX;
        PLAB_CHECK(fits, path << " line " << n << ": \"max_new_tokens\" is " << m.dump()
                              << "; give a whole number from 1 to " << INT_MAX
                              << " (or leave it out for the command's -n)");
        p.max_new_tokens = static_cast<int>(m.get<std::int64_t>());
    }
    return p;
}

}  // namespace

std::vector<PromptLine> parse_prompts(const std::string& text, const std::string& path) {
    // Split into lines: '\n' ends a line; a '\r' before it (a file written on
    // Windows) is part of the line ending, not of the prompt.
    std::vector<std::string> lines;
    std::size_t start = 0;
    // A UTF-8 byte order mark, as some editors write first, is not prompt text.
    if (text.rfind("\xEF\xBB\xBF", 0) == 0) start = 3;
    while (start < text.size()) {
        std::size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        std::string line = text.substr(start, end - start);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        lines.push_back(std::move(line));
        start = end + 1;
    }
    // The first non-blank line decides the format of the whole file.
    bool json = false;
    for (const std::string& line : lines) {
        if (is_blank(line)) continue;
        json = line[line.find_first_not_of(" \t")] == '{';
        break;
    }
    std::vector<PromptLine> prompts;
    for (std::size_t i = 0; i < lines.size(); ++i) {
        if (is_blank(lines[i])) continue;
        const int n = static_cast<int>(i) + 1;
        if (json) {
            prompts.push_back(parse_json_line(lines[i], n, path));
        } else {
            prompts.push_back({n, lines[i], std::nullopt});
        }
    }
    PLAB_CHECK(!prompts.empty(),
               "prompts file " << path << " holds no prompt ("
                               << (lines.empty() ? std::string("it is empty")
                                                 : std::to_string(lines.size()) + " blank lines")
                               << "); write one prompt per line, or JSON Lines "
                                  "{\"prompt\": \"...\"}");
    return prompts;
}

std::vector<PromptLine> read_prompts_file(const std::string& path) {
    return parse_prompts(read_text_file(path, "prompts file"), path);
}

}  // namespace plab::cli
