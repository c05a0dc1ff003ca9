// Issue 17 without a window: token labels in every script (text_utf8.h), the --scale
// range (options.h) and the "command for this view" (view_command.h). The shell is the
// oracle of the quoting: /bin/sh must hand every quoted prompt back unchanged.
#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "app/controller.h"
#include "app/options.h"
#include "app/text_utf8.h"
#include "app/view_command.h"
#include "core/error.h"
#include "model/model_io.h"
#include "tiny_model.h"

namespace plab::viewer {
namespace {

// What `sh -c 'printf %s WORD'` prints for the quoted word: the word the shell passed on.
std::string through_shell(const std::string& quoted) {
    const std::string cmd = "printf %s " + quoted;
    FILE* p = popen(("/bin/sh -c " + shell_quote(cmd)).c_str(), "r");
    REQUIRE(p != nullptr);
    std::string out;
    std::array<char, 256> buf{};
    std::size_t n = 0;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    REQUIRE(pclose(p) == 0);
    return out;
}

const std::string kScripts = "Привет мир. Γειά σου κόσμε. Rødgrød med fløde på én æble.";

}  // namespace

TEST_CASE("utf8_step accepts whole shortest-form characters and nothing else", "[viewer][text]") {
    CHECK(utf8_step("A", 0).valid);
    const Utf8Step d = utf8_step("Д", 0);  // D0 94
    CHECK((d.valid && d.cp == 0x414 && d.len == 2));
    CHECK_FALSE(utf8_step("\xD0", 0).valid);              // cut off: the rest is in the next token
    CHECK_FALSE(utf8_step("\x94", 0).valid);              // a continuation byte alone
    CHECK_FALSE(utf8_step("\xC0\x80", 0).valid);          // overlong NUL
    CHECK_FALSE(utf8_step("\xED\xA0\x80", 0).valid);      // a UTF-16 surrogate
    CHECK_FALSE(utf8_step("\xF4\x90\x80\x80", 0).valid);  // past U+10FFFF
    const Utf8Step e = utf8_step("\xF0\x9F\x98\x80", 0);  // U+1F600, four bytes
    CHECK((e.valid && e.cp == 0x1F600 && e.len == 4));
}

TEST_CASE("token labels show whole characters, split bytes as <D0>, missing glyphs as U+",
          "[viewer][text]") {
    // The tokenizers write a byte they cannot show as <0xHH>: two bytes of one character
    // come back as the character, one alone as its byte.
    CHECK(token_display("<0xD0><0x94>") == "Д");
    CHECK(token_display("<0xD0>") == "<D0>");
    CHECK(token_display("<0x94>a") == "<94>a");
    CHECK(token_display("æ<0xC3>") == "æ<C3>");
    CHECK(token_display(" a\tb\n") == "_a\\tb\\n");
    CHECK(token_display("<0x01>") == "<01>");  // a control character has no glyph
    // A font without Greek: the character is named, never drawn as '?'.
    const auto no_greek = [](char32_t cp) { return cp < 0x370 || cp > 0x3FF; };
    CHECK(token_display("αb", no_greek) == "<U+03B1>b");
    CHECK(token_display("é", no_greek) == "é");
    CHECK(codepoint_name(0x4E2D) == "U+4E2D");
}

TEST_CASE("the shipped BPE model's tokens regroup into the prompt's characters", "[viewer][text]") {
    // Byte-level BPE cuts Cyrillic and Greek characters (two bytes each) across tokens:
    // the tokens' bytes, joined, are the prompt; a token's label has <HH> exactly for
    // the bytes that are no whole character inside that token.
    const Model model = load_model(std::string(PLAB_TESTS_DIR) + "/../assets/model");
    const Tokenizer& tok = *model.tokenizer;
    const std::vector<int32_t> ids = tok.encode(kScripts, /*add_bos=*/false);
    std::string joined;
    int split = 0, whole_non_ascii = 0;
    for (int32_t id : ids) {
        const std::string bytes = token_bytes_from_text(tok.token_text(id));
        joined += bytes;
        const std::string label = token_display(tok.token_text(id));
        bool all_valid = true;
        for (std::size_t i = 0; i < bytes.size();) {
            const Utf8Step c = utf8_step(bytes, i);
            all_valid = all_valid && c.valid;
            whole_non_ascii += c.valid && c.cp >= 0x80;
            i += static_cast<std::size_t>(c.len);
        }
        INFO("token " << id << " '" << tok.token_text(id) << "' shown as '" << label << "'");
        CHECK((label.find("<") != std::string::npos) == !all_valid);
        split += !all_valid;
    }
    CHECK(joined == kScripts);
    INFO(split << " tokens hold part of a character, " << whole_non_ascii
               << " whole non-ASCII characters inside tokens");
    CHECK(whole_non_ascii + split > 0);  // the prompt did reach the non-ASCII path
}

TEST_CASE("the UI scale takes 0.5 to 4 and refuses the rest with one line", "[viewer][text]") {
    CHECK(parse_scale("2") == 2.0f);
    CHECK(parse_scale("0.5") == 0.5f);
    CHECK(parse_scale("4") == 4.0f);
    for (const char* bad : {"0", "100", "abc", "2x", "", "nan", "inf", "-1", "4.01", "1e400"})
        REQUIRE_THROWS_WITH(parse_scale(bad), Catch::Contains("between 0.5 and 4"));
}

TEST_CASE("shell_quote hands every prompt to the program unchanged", "[viewer][text]") {
    std::vector<std::string> words = {kScripts,    "it's",           "$HOME `id` \"x\" \\n *",
                                      "a'b'c",     "plain-word,1:2", "'",
                                      "new\nline", "  spaces  "};
    // Seeded random printable ASCII, quotes and shell characters included.
    std::mt19937 rng(17);
    for (int i = 0; i < 20; ++i) {
        std::string w;
        const int n = 1 + static_cast<int>(rng() % 24);
        for (int k = 0; k < n; ++k) w += static_cast<char>(32 + rng() % 95);
        words.push_back(w);
    }
    for (const std::string& w : words) {
        INFO("word [" << w << "] quoted as " << shell_quote(w));
        CHECK(through_shell(shell_quote(w)) == w);
    }
    CHECK(shell_quote("window:8+sink:2") == "window:8+sink:2");  // safe words stay readable
}

TEST_CASE("the mask panel's command names the run's model, prompt, backend, plan and mask",
          "[viewer][text]") {
    Controller ctrl(test::tiny_viewer_model());
    ViewerState state;
    state.scene = Scene::kMask;
    state.prompt = "a 'quoted' prompt";
    state.chunks = "5";
    state.mask = "window:4";
    Snapshot snap;
    ctrl.fill_model_info(snap);
    ctrl.refresh_mask(state, snap.mask);
    snap.mask.ready = true;
    std::string why;
    const std::vector<std::string> w = view_command(state, snap, "/models/m", why);
    REQUIRE(why.empty());
    const std::string line = shell_join(w);
    CHECK(line.rfind("plab prefill --model /models/m --prompt 'a '\\''quoted'\\'' prompt'", 0) ==
          0);
    CHECK(line.find("--backend cpu-ref --chunks " + snap.mask.plan.to_string() +
                    " --mask window:4") != std::string::npos);
    CHECK(snap.mask.top.size() == 5);
    CHECK(view_numbers(state, snap)
              .rfind("first token " + std::to_string(snap.mask.first_token_id) + ", top", 0) == 0);
    // A cut prompt is given as its token ids, the BOS among them.
    state.prompt_tokens = 7;
    ctrl.refresh_mask(state, snap.mask);
    snap.mask.ready = true;
    const std::string cut = shell_join(view_command(state, snap, "/m", why));
    std::string ids;
    for (int32_t id : snap.mask.tokens) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    INFO(cut << " / " << why);
    CHECK(cut.find("--tokens " + ids + " ") != std::string::npos);
    // Random weights: no command, and the reason.
    snap.random_model = true;
    CHECK(view_command(state, snap, "/m", why).empty());
    CHECK(why.find("random weights") != std::string::npos);
}

}  // namespace plab::viewer
