#include "serving/json_lines.h"

#include <algorithm>
#include <cstdint>

#include "core/error.h"

namespace plab {
namespace {

// nlohmann's parse message without its "[json.exception...] parse error at
// line 1, column 7: " head: each line is parsed alone, so its "line 1" would
// mislead; the column is reported from the error's byte offset instead.
std::string json_reason(const nlohmann::json::parse_error& e) {
    const std::string what = e.what();
    const std::size_t column = what.find("column");
    const std::size_t colon = what.find(": ", column == std::string::npos ? 0 : column);
    return colon == std::string::npos ? what : what.substr(colon + 2);
}

}  // namespace

std::vector<TextLine> split_lines(std::string_view text) {
    std::vector<TextLine> lines;
    std::size_t start = 0;
    if (text.substr(0, 3) == "\xEF\xBB\xBF") start = 3;
    for (int number = 1; start < text.size(); ++number) {
        std::size_t end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        std::string_view line = text.substr(start, end - start);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        lines.push_back({number, line});
        start = end + 1;
    }
    return lines;
}

bool is_blank(std::string_view line) {
    return line.find_first_not_of(" \t") == std::string_view::npos;
}

std::string a_type(const nlohmann::json& value) {
    const std::string t = value.type_name();
    if (value.is_null()) return t;
    return (t == "array" || t == "object" ? "an " : "a ") + t;
}

nlohmann::json parse_object_line(std::string_view line, const std::string& at,
                                 const std::string& example) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
        PLAB_CHECK(false, at << "malformed JSON at column " << e.byte << " (" << json_reason(e)
                             << ")" << example);
    } catch (const nlohmann::json::out_of_range&) {
        // A number literal beyond a double (1e99999): valid JSON grammar that
        // no parser can hold (found by the fuzzer; it used to escape as a
        // library exception instead of this line).
        PLAB_CHECK(false, at << "a number too large to read (beyond a double's range)" << example);
    }
    PLAB_CHECK(j.is_object(), at << a_type(j) << ", not an object" << example);
    return j;
}

bool is_whole_in_range(const nlohmann::json& value, long long lo, long long hi) {
    if (!value.is_number_integer()) return false;
    if (value.is_number_unsigned() && value.get<std::uint64_t>() > std::uint64_t(INT64_MAX))
        return false;
    const long long v = value.get<long long>();
    return v >= lo && v <= hi;
}

void check_known_keys(const nlohmann::json& object, std::initializer_list<std::string_view> known,
                      const std::string& at, const std::string& keys_hint) {
    for (const auto& [key, value] : object.items()) {
        PLAB_CHECK(std::find(known.begin(), known.end(), key) != known.end(),
                   at << "unknown key \"" << key << "\"; " << keys_hint);
    }
}

}  // namespace plab
