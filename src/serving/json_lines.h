// JSON Lines: one object per line, as `plab generate --prompts` and `plab
// serve --workload` read them. One reader, so both files treat line endings,
// blank lines, a byte order mark and bad lines the same way.
//
// What a learner meets here is only the error messages, and they are the
// point: every refusal names the file, the line as an editor counts it (1 for
// the first), what is wrong (the column of malformed JSON, the type found
// where an object was expected, an unknown key) and what to write instead.
#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace plab {

// One line of a text file: '\n' ends a line, a '\r' before it (a file
// written on Windows) belongs to the line ending, and a UTF-8 byte order mark
// at the very start (some editors write one) is not text.
struct TextLine {
    int number = 0;  // 1-based
    std::string_view text;
};
std::vector<TextLine> split_lines(std::string_view text);
// Empty or only spaces and tabs: a separator, never a request.
bool is_blank(std::string_view line);

// "a string", "an array", "null": the JSON type of a value, for a message.
std::string a_type(const nlohmann::json& value);

// Parses one line that must hold one JSON object. `at` starts every message
// ("prompts.jsonl line 3: "); `example` ends the messages about the line's
// shape ("; write one object per line, e.g. {...}").
nlohmann::json parse_object_line(std::string_view line, const std::string& at,
                                 const std::string& example);
// Whether `value` is a JSON integer in lo..hi. An unsigned integer above
// INT64_MAX is refused before it is read as a signed one (it would wrap to a
// negative number and the message would mislead).
bool is_whole_in_range(const nlohmann::json& value, long long lo, long long hi);
// Refuses a key outside `known`, so a typo ("max_tokens") is not silently
// ignored; `keys_hint` says what the keys are.
void check_known_keys(const nlohmann::json& object, std::initializer_list<std::string_view> known,
                      const std::string& at, const std::string& keys_hint);

}  // namespace plab
