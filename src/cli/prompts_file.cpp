#include "cli/prompts_file.h"

#include <climits>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "serving/json_lines.h"

namespace plab::cli {
namespace {

PromptLine parse_json_line(std::string_view line, int n, const std::string& path) {
    static const std::string kExample =
        R"(; write one object per line, e.g. {"prompt": "Once upon a time", "max_new_tokens": 8})";
    const std::string at = path + " line " + std::to_string(n) + ": ";
    const nlohmann::json j = parse_object_line(line, at, kExample);
    check_known_keys(j, {"prompt", "max_new_tokens"}, at,
                     "the keys are \"prompt\" (required) and \"max_new_tokens\"");
    PromptLine p;
    p.line = n;
    PLAB_CHECK(j.contains("prompt") && j["prompt"].is_string(),
               at << (j.contains("prompt") ? "\"prompt\" is " + a_type(j["prompt"])
                                           : std::string("no \"prompt\" key"))
                  << "; give the prompt as a JSON string" << kExample);
    p.text = j["prompt"].get<std::string>();
    PLAB_CHECK(!p.text.empty(),
               at << "\"prompt\" is an empty string; give the text the request starts from");
    if (j.contains("max_new_tokens")) {
        const nlohmann::json& m = j["max_new_tokens"];
        PLAB_CHECK(is_whole_in_range(m, 1, INT_MAX),
                   at << "\"max_new_tokens\" is " << m.dump() << "; give a whole number from 1 to "
                      << INT_MAX << " (or leave it out for the command's -n)");
        p.max_new_tokens = static_cast<int>(m.get<std::int64_t>());
    }
    return p;
}

}  // namespace

std::vector<PromptLine> parse_prompts(const std::string& text, const std::string& path) {
    const std::vector<TextLine> lines = split_lines(text);
    // The first non-blank line decides the format of the whole file.
    bool json = false;
    for (const TextLine& line : lines) {
        if (is_blank(line.text)) continue;
        json = line.text[line.text.find_first_not_of(" \t")] == '{';
        break;
    }
    std::vector<PromptLine> prompts;
    for (const TextLine& line : lines) {
        if (is_blank(line.text)) continue;
        if (json) {
            prompts.push_back(parse_json_line(line.text, line.number, path));
        } else {
            prompts.push_back({line.number, std::string(line.text), std::nullopt});
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

}  // namespace plab::cli
