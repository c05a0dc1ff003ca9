// The command line's front door (see front_door.h).
#include "cli/front_door.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <sstream>

namespace plab::cli {

namespace {

// Levenshtein distance: the fewest single-character edits from a to b.
std::size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t above = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
            diagonal = above;
        }
    }
    return row[b.size()];
}

// The subcommand named by the first argument, or nullptr.
const CLI::App* command_of(const CLI::App& app, const std::vector<std::string>& args) {
    if (args.empty()) return nullptr;
    for (const CLI::App* sub : app.get_subcommands({})) {
        if (sub->get_name() == args[0]) return sub;
    }
    return nullptr;
}

std::vector<std::string> command_names(const CLI::App& app) {
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
    return names;
}

// Every spelling of every option of `cmd` ("--chunks", "-n", "--help").
std::vector<std::string> option_names(const CLI::App& cmd) {
    std::vector<std::string> names;
    for (const CLI::Option* o : cmd.get_options()) {
        for (const std::string& s : o->get_snames()) names.push_back("-" + s);
        for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
    }
    return names;
}

bool looks_like_number(const std::string& s) {
    std::size_t i = s[0] == '-' || s[0] == '+' ? 1 : 0;
    return i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.');
}

// The first option-looking argument after the command that `cmd` does not
// declare ("--chunk" of "--chunk=4"; "-x" of "-x5"), or "".
std::string unknown_option(const CLI::App& cmd, const std::vector<std::string>& args) {
    const std::vector<std::string> known = option_names(cmd);
    for (std::size_t i = 1; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--") break;  // everything after it is a positional value
        if (a.size() < 2 || a[0] != '-' || looks_like_number(a)) continue;
        const std::string name = a[1] == '-' ? a.substr(0, a.find('=')) : a.substr(0, 2);
        if (std::find(known.begin(), known.end(), name) == known.end()) return name;
    }
    return "";
}

std::string error_on_one_line(std::string s) {
    std::replace(s.begin(), s.end(), '\n', ' ');
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
}

// CLI11's two terse messages in words a student reads at once; others as they are.
std::string plain_words(const CLI::App& cmd, const std::string& message) {
    static const std::regex conversion("Could not convert: (\\S+) = (.*)");
    static const std::regex missing("(\\S+): [0-9]+ required (\\S+) missing");
    std::smatch m;
    if (std::regex_match(message, m, conversion)) {
        const CLI::Option* o = cmd.get_option_no_throw(m[1].str());
        const std::string type = o != nullptr ? o->get_type_name() : "";
        return m[1].str() + " expects " +
               (type.empty() ? "another value" : "a value of type " + type) + ", got '" +
               m[2].str() + "'";
    }
    if (std::regex_match(message, m, missing)) {
        return m[1].str() + " needs a value (" + m[2].str() + ")";
    }
    return message;
}

// A prompt typed without quotes (plab prefill Once upon a time) reaches CLI11
// as one positional and extra words, which it names in reverse order. The
// words after the command that are neither options nor their values, in the
// order typed; "" when the command takes no prompt or this is another error.
std::string unquoted_prompt(const CLI::App& cmd, const std::vector<std::string>& args,
                            const CLI::ParseError& e) {
    if (dynamic_cast<const CLI::ExtrasError*>(&e) == nullptr ||
        cmd.get_option_no_throw("prompt") == nullptr)
        return "";
    std::string words;
    for (std::size_t i = 1; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a.size() > 1 && a[0] == '-') {
            const CLI::Option* o = cmd.get_option_no_throw(a.substr(0, a.find('=')));
            if (o != nullptr && o->get_type_size() > 0 && a.find('=') == std::string::npos) ++i;
            continue;
        }
        words += (words.empty() ? "" : " ") + a;
    }
    return words;
}

}  // namespace

std::string closest(const std::string& word, const std::vector<std::string>& candidates) {
    std::string best;
    std::size_t best_distance = std::string::npos;
    for (const std::string& c : candidates) {
        // A typed prefix ("--chunk" for "--chunks") is as close as one edit.
        const bool prefix = word.size() >= 3 && c.rfind(word, 0) == 0;
        const std::size_t d = prefix ? 1 : edit_distance(word, c);
        if (d < best_distance) best_distance = d, best = c;
    }
    // Two edits at most, and fewer than half the word: "--chunk" -> "--chunks",
    // "prefil" -> "prefill", but "xyz" is no typo of "toy".
    return best_distance <= 2 && 2 * best_distance < word.size() ? best : "";
}

std::string overview(const CLI::App& app) {
    std::ostringstream os;
    os << "plab " << PLAB_VERSION << " - Prefill Lab: " << app.get_description() << "\n\n"
       << "Usage: plab COMMAND [OPTIONS]   (plab COMMAND --help lists a command's options)\n\n"
       << "Commands:\n";
    std::size_t width = 0;
    for (const CLI::App* sub : app.get_subcommands({}))
        width = std::max(width, sub->get_name().size());
    for (const CLI::App* sub : app.get_subcommands({})) {
        os << "  " << sub->get_name() << std::string(width + 2 - sub->get_name().size(), ' ')
           << sub->get_description() << "\n";
    }
    os << "\nStart with lesson 1, lessons/01-toy-example.md: its first command is `plab toy`.\n"
       << "Every lesson: lessons/README.md. The pictures: plab-viewer.\n";
    return os.str();
}

std::string version_text() {
    std::ostringstream os;
    os << "plab " << PLAB_VERSION << "\n"
       << "model files: llama2.c checkpoints (.bin: legacy 7-int header, v1 \"ak42\"), "
          "Hugging Face Llama folders (config.json + model.safetensors), GGUF (llama "
          "architecture; F32, F16, BF16, Q8_0)\n"
       << "tokenizers: byte-level (plab), llama2.c tokenizer.bin, Hugging Face tokenizer.json "
          "(BPE), GGUF metadata (llama, gpt2)\n"
       << "GPU backends: "
       << (PLAB_HAVE_CUDA ? "native CUDA kernels built for sm_" PLAB_CUDA_ARCHS
                            " (emulated where no GPU is found)"
                          : "emulated (no native CUDA kernels in this build)")
       << "\n";
    return os.str();
}

std::string usage_error(const CLI::App& app, const CLI::ParseError& e,
                        const std::vector<std::string>& args) {
    const CLI::App* cmd = command_of(app, args);
    if (cmd == nullptr) {
        if (args.empty() || args[0].empty() || args[0][0] == '-') {
            const std::string what = args.empty() ? "" : args[0];
            const std::string guess = closest(what, {"--help", "--version"});
            return "unknown option " + what +
                   (guess.empty() ? "" : "; did you mean " + guess + "?") +
                   " (plab --help lists the commands)";
        }
        const std::string guess = closest(args[0], command_names(app));
        return "unknown command '" + args[0] + "'" +
               (guess.empty() ? "" : "; did you mean '" + guess + "'?") +
               " (plab --help lists the commands)";
    }
    const std::string name = cmd->get_name();
    const std::string hint = " (plab " + name + " --help lists its options)";
    const std::string unknown = unknown_option(*cmd, args);
    if (!unknown.empty()) {
        const std::string guess = closest(unknown, option_names(*cmd));
        return name + ": unknown option " + unknown +
               (guess.empty() ? "" : "; did you mean " + guess + "?") + hint;
    }
    if (const std::string words = unquoted_prompt(*cmd, args, e); !words.empty())
        return name + ": the prompt is several words; quote it: plab " + name + " \"" + words +
               "\" (or give --prompt-file FILE)";
    return name + ": " + plain_words(*cmd, error_on_one_line(e.what())) + hint;
}

}  // namespace plab::cli
