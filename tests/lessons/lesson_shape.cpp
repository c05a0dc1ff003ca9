// The shape of a lesson (lesson_shape.h).
#include "lesson_shape.h"

#include <regex>

namespace plab::lessons {

namespace {

std::string trimmed(const std::string& s) {
    const std::size_t a = s.find_first_not_of(' ');
    return a == std::string::npos ? "" : rstrip(s.substr(a));
}

}  // namespace

std::vector<std::pair<int, std::string>> shape_problems(const Lesson& lesson) {
    std::vector<std::pair<int, std::string>> out;
    const auto& lines = lesson.lines;
    const int count = int(lines.size());
    auto line_of = [&](const std::string& prefix, int from = 1, int to = -1) {
        for (int n = from; n <= (to < 0 ? count : to); ++n)
            if (trimmed(lines[std::size_t(n - 1)]).rfind(prefix, 0) == 0) return n;
        return 0;
    };
    static const std::regex title("^# Lesson [0-9]+ — .+");
    if (count == 0 || !std::regex_match(lines[0], title))
        out.push_back({1, "the first line is the title: \"# Lesson N — Title\""});
    const int takeaway = line_of("## Takeaway");
    const int exercises = line_of("## Exercises");
    const int sources = line_of("## Sources");
    const int body_end = takeaway != 0 ? takeaway : count + 1;

    // What you will learn, what you need, how long — before the first step.
    const int first_block = lesson.blocks.empty() ? count : lesson.blocks.front().fence_open;
    const int learn = line_of("**You will learn**", 1, first_block);
    if (learn == 0) {
        out.push_back(
            {1, "no \"**You will learn**\" list (2-4 objectives) before the first command"});
    } else {
        int bullets = 0, n = learn + 1;
        while (n <= count && trimmed(lines[std::size_t(n - 1)]).empty()) ++n;
        // Bullets, each perhaps wrapped over indented lines, up to a blank line.
        for (; n <= count && !trimmed(lines[std::size_t(n - 1)]).empty(); ++n) {
            const std::string& l = lines[std::size_t(n - 1)];
            if (l.rfind("- ", 0) == 0) {
                ++bullets;
            } else if (l.rfind(" ", 0) != 0) {
                break;  // not a bullet nor its continuation: the list ended
            }
        }
        if (bullets < 2 || bullets > 4)
            out.push_back({learn, "\"**You will learn**\" lists " + std::to_string(bullets) +
                                      " objectives; give 2 to 4, one \"- \" bullet each"});
    }
    if (line_of("**You need:**", 1, first_block) == 0)
        out.push_back({1,
                       "no \"**You need:** ...\" line (the lessons before this one, or "
                       "\"nothing before this lesson\") before the first command"});
    static const std::regex time_line("^\\*\\*Time:\\*\\* about [0-9]+ minutes\\.?$");
    bool has_time = false;
    for (int n = 1; n < first_block && n <= count; ++n)
        has_time |= std::regex_match(trimmed(lines[std::size_t(n - 1)]), time_line);
    if (!has_time)
        out.push_back({1, "no \"**Time:** about N minutes.\" line before the first command"});

    // A prediction before every step of the body.
    int since = 1;  // where the text before the next block starts
    for (const Block& b : lesson.blocks) {
        const int at = b.comment_open != 0 ? b.comment_open : b.fence_open;
        if (at < body_end) {
            bool asked = false;
            for (int n = since; n < at; ++n)
                asked |= trimmed(lines[std::size_t(n - 1)]).rfind("**Predict:**", 0) == 0;
            if (!asked)
                out.push_back({b.fence_open,
                               "no \"**Predict:** ...?\" question before this "
                               "command: ask what it will print before it runs"});
        }
        since = b.fence_close + 1;
    }

    // A five-line takeaway, exercises with answers, sources, in that order.
    if (takeaway == 0) {
        out.push_back({count, "no \"## Takeaway\" section (5 bullets) after the steps"});
    } else {
        int bullets = 0;
        const int end = exercises != 0 ? exercises : count + 1;
        for (int n = takeaway + 1; n < end; ++n)
            bullets += trimmed(lines[std::size_t(n - 1)]).rfind("- ", 0) == 0 ? 1 : 0;
        if (bullets != 5)
            out.push_back({takeaway, "the takeaway has " + std::to_string(bullets) +
                                         " bullets; give exactly 5"});
    }
    if (exercises == 0 || exercises < takeaway) {
        out.push_back({count, "no \"## Exercises\" section after the takeaway"});
    } else if (line_of("<summary>Answers", exercises, sources != 0 ? sources : count) == 0) {
        out.push_back({exercises,
                       "the exercises have no answers: add <details> with "
                       "<summary>Answers ...</summary> after the questions"});
    }
    if (sources == 0 || sources < exercises)
        out.push_back({count, "no \"## Sources\" section after the exercises"});
    return out;
}

}  // namespace plab::lessons
