// Token spans (issue 49, "tokenizers you can see"): for every tokenizer the
// project reads and many seeded random texts (ASCII, Cyrillic, CJK, emoji,
// ill-formed UTF-8, added-token strings, runs of spaces), encode_with_spans
// gives encode()'s ids, and its spans tile the text: in order, without gaps or
// overlaps, their concatenation the text. Each span is then held to what the
// token is (not only to tiling, which a wrong split would pass too): the bytes
// a token covers are its own bytes, up to what the tokenizer is known to
// change (SentencePiece's inserted space, '▁' read as a space, an added
// token's stripped spaces, a byte-fallback token's one byte).
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "model/model_io.h"
#include "model/tokenizers/tokenizer.h"
#include "model/tokenizers/tokenizer_bpe.h"
#include "model/tokenizers/tokenizer_hf.h"
#include "model/tokenizers/tokenizer_hf_unicode.h"
#include "model/tokenizers/tokenizer_ids.h"
#include "model/tokenizers/tokenizer_llama2c.h"
#include "model_test_util.h"
#include "test_util.h"

using namespace plab;
using namespace plab::test;

namespace {

std::string span_read(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    REQUIRE(f.good());
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::string span_hf_dir(const std::string& family) {
    return std::string(PLAB_TESTS_DIR) + "/golden/hf_tokenizers/" + family;
}

// A family's tokenizer.json with `edit` applied (configurations no test file has).
std::unique_ptr<HfTokenizer> span_hf_edited(const std::string& family,
                                            const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = nlohmann::json::parse(span_read(span_hf_dir(family) + "/tokenizer.json"));
    edit(j);
    return HfTokenizer::parse(j.dump(), span_read(span_hf_dir(family) + "/tokenizer_config.json"),
                              family + " (edited)");
}

// A llama2.c vocabulary in its layout (<unk> <s> </s>, the 256 byte tokens),
// then pieces that merge: spaces (SentencePiece's dummy prefix beside a space
// of the text), English, a few Cyrillic and CJK pieces; the rest falls back to bytes.
Llama2cTokenizer span_llama2c() {
    std::vector<std::string> pieces;
    std::vector<float> scores;
    llama2c_base_vocab(pieces, scores);
    for (const char* p : {" ",
                          "a",
                          "e",
                          "h",
                          "i",
                          "t",
                          "o",
                          "n",
                          "s",
                          "  ",
                          " t",
                          "th",
                          " th",
                          "he",
                          " the",
                          "hi",
                          " hi",
                          "in",
                          " a",
                          "\xd0\xb2",
                          "\xd1\x80",
                          "\xd0\xb5",
                          "\xd0\xb2\xd1\x80",
                          " \xd0\xb2",
                          "\xe4\xb8\xad",
                          "\xe6\x96\x87",
                          "\xe4\xb8\xad\xe6\x96\x87",
                          "\xe2\x96\x81"}) {
        pieces.push_back(p);
        scores.push_back(float(pieces.size()));  // later pieces merge first
    }
    return Llama2cTokenizer(pieces, scores);
}

// One character (or ill-formed byte) of the kinds the test mixes.
void span_append_random(std::mt19937_64& rng, std::string& s, bool added_tokens) {
    auto pick = [&](std::uint32_t lo, std::uint32_t hi) {
        return std::uniform_int_distribution<std::uint32_t>(lo, hi)(rng);
    };
    switch (pick(0, 13)) {
        case 0:
        case 1:
        case 2:  // ASCII letters, digits, punctuation
            s += static_cast<char>(pick(0x21, 0x7E));
            break;
        case 3:
        case 4:  // spaces, runs of them, newlines, tabs
            s += " \n\t  "[pick(0, 4)];
            break;
        case 5:  // an English word with its space
            s += std::vector<std::string>{" the", " time", "hi", " a", "this"}[pick(0, 4)];
            break;
        case 6:
        case 7:  // Cyrillic letters А..я, Ё, ё
            s += hf::utf8_encode(pick(0, 9) == 0 ? 0x401 : pick(0x410, 0x44F));
            break;
        case 8:  // CJK
            s += hf::utf8_encode(pick(0, 3) == 0 ? 0x4E2D : pick(0x4E00, 0x9FFF));
            break;
        case 9:  // emoji
            s += hf::utf8_encode(pick(0x1F300, 0x1F6FF));
            break;
        case 10:  // ill-formed UTF-8: a lone continuation byte, a cut lead byte, 0xFF
            s += std::vector<std::string>{"\x80", "\xd0", "\xe4\xb8", "\xff",
                                          "\xc0\xaf"}[pick(0, 4)];
            break;
        case 11:  // SentencePiece's own space character typed in the text
            s += "\xe2\x96\x81";
            break;
        default:  // strings of added tokens, with spaces around for lstrip/rstrip
            if (added_tokens)
                s += std::vector<std::string>{"<s>",           "</s>",
                                              " <mask> ",      "<|begin_of_text|>",
                                              "<|endoftext|>", "<|im_start|>"}[pick(0, 5)];
            break;
    }
}

std::string span_random_text(std::mt19937_64& rng, bool added_tokens) {
    std::string s;
    const int n = std::uniform_int_distribution<int>(0, 24)(rng);
    for (int i = 0; i < n; ++i) span_append_random(rng, s, added_tokens);
    return s;
}

std::string span_hex(std::string_view s) {
    std::string out;
    for (unsigned char c : s) {
        char buf[4];
        std::snprintf(buf, sizeof buf, "%02X ", c);
        out += buf;
    }
    return out;
}

// Counts of how each token's span was explained (so a test that explains
// nothing fails: the oracle must see every case it claims to handle).
struct SpanTally {
    int same = 0, inserted_space = 0, metaspace_char = 0, inserted_only = 0, added = 0, unk = 0,
        ids = 0;
};

// `covered` = text[start, end) for one token whose own bytes are `bytes`.
// Returns how it is explained, or "" when it is not.
std::string span_explain(const Tokenizer& tok, int32_t id, std::string_view covered,
                         SpanTally& tally) {
    const std::string bytes = tok.token_bytes(id);
    if (bytes == covered) return ++tally.same, "same bytes";
    // The IdTokenizer: the number and the separators after it.
    if (tok.kind() == "ids") {
        std::string digits;
        for (char c : covered)
            if (c != ',' && c != ' ' && c != '\n' && c != '\t') digits += c;
        return std::stoll(digits) == id ? (++tally.ids, "an id") : "";
    }
    // An added token (typed "<s>", "<mask>"): its text, with the spaces it strips.
    const std::string shown = tok.token_text(id);
    std::string_view trimmed = covered;
    while (!trimmed.empty() &&
           (trimmed.front() == ' ' || trimmed.front() == '\t' || trimmed.front() == '\n'))
        trimmed.remove_prefix(1);
    while (!trimmed.empty() &&
           (trimmed.back() == ' ' || trimmed.back() == '\t' || trimmed.back() == '\n'))
        trimmed.remove_suffix(1);
    if (!trimmed.empty() && trimmed == shown && shown.front() == '<')
        return ++tally.added, "an added token";
    // SentencePiece: '▁' typed in the text reads as a space; one space inserted
    // before a text (the dummy prefix) is in the token but not in the text.
    std::string read;
    for (std::size_t i = 0; i < covered.size(); ++i) {
        if (covered.compare(i, 3, "\xe2\x96\x81") == 0) {
            read += ' ';
            i += 2;
        } else {
            read += covered[i];
        }
    }
    if (covered.empty() && bytes == " ") return ++tally.inserted_only, "an inserted space";
    if (bytes == " " + read) return ++tally.inserted_space, "an inserted space + its text";
    if (bytes == read) return ++tally.metaspace_char, "'▁' typed, read as a space";
    if (shown == "<unk>" && !covered.empty()) return ++tally.unk, "<unk>";
    return "";
}

// The whole contract for one text; returns the spans.
std::vector<TokenSpan> span_check(const Tokenizer& tok, const std::string& name,
                                  const std::string& text, bool add_bos, SpanTally& tally) {
    INFO(name << ", add_bos " << add_bos << ", text bytes " << span_hex(text));
    const std::vector<TokenSpan> spans = tok.encode_with_spans(text, add_bos);
    // 1. The ids are encode()'s.
    std::vector<int32_t> ids;
    for (const TokenSpan& s : spans) ids.push_back(s.id);
    REQUIRE(ids == tok.encode(text, add_bos));
    // 2. The BOS of add_bos covers nothing.
    const std::size_t bos = tok.encode("", add_bos).size();
    REQUIRE(spans.size() >= bos);
    for (std::size_t k = 0; k < bos; ++k) REQUIRE((spans[k].start == 0 && spans[k].end == 0));
    // 3. The spans tile the text: in order, no gap, no overlap, 0 to the end.
    std::size_t at = 0;
    std::string joined;
    for (const TokenSpan& s : spans) {
        INFO("token " << s.id << " [" << s.start << "," << s.end << ")");
        REQUIRE(s.start == at);
        REQUIRE(s.end >= s.start);
        REQUIRE(s.end <= text.size());
        joined.append(text, s.start, s.end - s.start);
        at = s.end;
    }
    if (spans.size() > bos) REQUIRE(at == text.size());
    REQUIRE(joined == text.substr(0, at));
    // 4. Each token covers what it is.
    for (std::size_t k = bos; k < spans.size(); ++k) {
        const TokenSpan& s = spans[k];
        const std::string_view covered = std::string_view(text).substr(s.start, s.end - s.start);
        INFO("token " << k << " id " << s.id << " '" << tok.token_text(s.id) << "' bytes "
                      << span_hex(tok.token_bytes(s.id)) << "covers [" << s.start << "," << s.end
                      << ") " << span_hex(covered));
        REQUIRE(span_explain(tok, s.id, covered, tally) != "");
    }
    return spans;
}

struct SpanCase {
    std::string name;
    std::unique_ptr<Tokenizer> tok;
};

std::vector<SpanCase> span_tokenizers() {
    std::vector<SpanCase> out;
    out.push_back({"byte", std::make_unique<ByteTokenizer>()});
    out.push_back({"bpe (shipped)", std::make_unique<BpeTokenizer>(BpeTokenizer::load(
                                        shipped_model_dir() + "/tokenizer.bpe"))});
    out.push_back({"llama2.c", std::make_unique<Llama2cTokenizer>(span_llama2c())});
    // The tokenizers of models on disk: GGUF files written by llama.cpp's gguf-py
    // ("llama" and "gpt2" tokenizer models) and the llama2.c checkpoint they came
    // from, whose tokenizer.bin merges English and Russian words.
    for (const char* f : {"spm/model-f32.gguf", "bpe/model-f32.gguf", "spm/model.bin"}) {
        Model m = load_model(std::string(PLAB_TESTS_DIR) + "/golden/gguf/" + f);
        out.push_back({std::string("the tokenizer of ") + f, std::move(m.tokenizer)});
    }
    for (const char* f : {"gpt2", "llama3", "qwen2", "smollm", "llama2", "metaspace"})
        out.push_back({std::string("tokenizer.json ") + f, HfTokenizer::load_dir(span_hf_dir(f))});
    // Configurations the test files lack, each a branch of the pipeline's offsets.
    out.push_back({"gpt2 add_prefix_space", span_hf_edited("gpt2", [](nlohmann::json& j) {
                       j["pre_tokenizer"]["add_prefix_space"] = true;
                   })});
    out.push_back({"metaspace always + split", span_hf_edited("metaspace", [](nlohmann::json& j) {
                       j["pre_tokenizer"]["prepend_scheme"] = "always";
                       j["pre_tokenizer"]["split"] = true;
                   })});
    out.push_back({"llama2 unk, no byte fallback", span_hf_edited("llama2", [](nlohmann::json& j) {
                       j["model"]["byte_fallback"] = false;
                       j["model"]["fuse_unk"] = true;
                   })});
    out.push_back({"llama3 ignore_merges", span_hf_edited("llama3", [](nlohmann::json& j) {
                       j["model"]["ignore_merges"] = true;
                   })});
    return out;
}

}  // namespace

TEST_CASE("token spans tile the text and give encode's ids, for every tokenizer",
          "[tokenizer][spans]") {
    SpanTally tally;
    int texts = 0;
    for (const SpanCase& c : span_tokenizers()) {
        std::mt19937_64 rng(49);
        for (int i = 0; i < 300; ++i) {
            const std::string text = span_random_text(rng, true);
            span_check(*c.tok, c.name, text, i % 2 == 0, tally);
            ++texts;
        }
        // The edge texts: empty, one space, one ill-formed byte, a text of spaces.
        for (const std::string text : {"", " ", "\xff", "   ", "\xe2\x96\x81"})
            for (bool bos : {true, false}) span_check(*c.tok, c.name, text, bos, tally);
    }
    // Ids typed as text: the id tokenizer of a model without a tokenizer.
    const IdTokenizer ids(1000, 1, 2);
    std::mt19937_64 rng(49);
    for (int i = 0; i < 200; ++i) {
        std::string text;
        const int n = int(rng() % 8);
        for (int k = 0; k < n; ++k)
            text +=
                std::string(" ,\n"[rng() % 3] == ',' ? ", " : " ") + std::to_string(rng() % 1000);
        span_check(ids, "ids", text, i % 2 == 0, tally);
    }
    WARN("spans of " << texts << " random texts: " << tally.same
                     << " tokens cover their own bytes, " << tally.inserted_space
                     << " their text after an inserted space, " << tally.inserted_only
                     << " only an inserted space (no byte), " << tally.metaspace_char
                     << " a typed '\u2581', " << tally.added << " added tokens, " << tally.unk
                     << " <unk>, " << tally.ids << " ids");
    // Every kind of span the contract names was met (the oracle was exercised).
    REQUIRE(tally.same > 10000);
    REQUIRE(tally.inserted_space > 100);
    REQUIRE(tally.inserted_only > 10);
    REQUIRE(tally.metaspace_char > 10);
    REQUIRE(tally.added > 100);
    REQUIRE(tally.unk > 10);
    REQUIRE(tally.ids > 100);
}

TEST_CASE("token spans: the cases a search for the token's bytes would get wrong",
          "[tokenizer][spans]") {
    SpanTally tally;
    // SentencePiece's dummy space beside the text's own: " hi" becomes "▁" (the
    // inserted one, no byte) and "▁hi" (the text's space and "hi").
    const Llama2cTokenizer l2c = span_llama2c();
    auto spans = span_check(l2c, "llama2.c", " hi", false, tally);
    REQUIRE(spans.size() == 2);
    REQUIRE(l2c.token_text(spans[0].id) == " ");
    REQUIRE((spans[0].start == 0 && spans[0].end == 0));
    REQUIRE(l2c.token_text(spans[1].id) == " hi");
    REQUIRE((spans[1].start == 0 && spans[1].end == 3));
    // Byte fallback inside one character: each byte token covers its own byte.
    // 'Ж' (D0 96) has no piece: <0xD0> covers byte 1, <0x96> byte 2.
    spans = span_check(l2c, "llama2.c", "\xd0\x96", false, tally);
    REQUIRE(spans.size() == 3);
    REQUIRE((spans[1].start == 0 && spans[1].end == 1 && spans[2].start == 1 && spans[2].end == 2));
    REQUIRE(l2c.token_text(spans[1].id) == "<0xD0>");
    // The BOS of add_bos comes first and covers nothing; the dummy space too.
    spans = span_check(l2c, "llama2.c", "the", true, tally);
    REQUIRE(spans.size() == 2);
    REQUIRE((spans[0].id == Llama2cTokenizer::kBos && spans[0].end == 0));
    REQUIRE((spans[1].start == 0 && spans[1].end == 3));  // " the": inserted space + "the"

    // An added token with lstrip and rstrip (llama3's "<mask>") covers the spaces it takes.
    const auto llama3 = HfTokenizer::load_dir(span_hf_dir("llama3"));
    const std::string text = "a  <mask>  b";
    spans = span_check(*llama3, "llama3", text, false, tally);
    bool found = false;
    for (const TokenSpan& s : spans) {
        if (llama3->token_text(s.id) != "<mask>") continue;
        found = true;
        REQUIRE(text.substr(s.start, s.end - s.start) == "  <mask>  ");
    }
    REQUIRE(found);
    // Llama 2's Prepend normalizer: a '▁' before every segment, after an added token too.
    const auto llama2 = HfTokenizer::load_dir(span_hf_dir("llama2"));
    spans = span_check(*llama2, "llama2", "<s>x", false, tally);
    REQUIRE(spans.size() == 3);
    REQUIRE(llama2->token_text(spans[0].id) == "<s>");
    REQUIRE((spans[0].start == 0 && spans[0].end == 3));
    REQUIRE((spans[1].start == 3 && spans[1].end == 3));  // the '▁' the normalizer put there
    REQUIRE((spans[2].start == 3 && spans[2].end == 4));
    // A typed '▁' is read as a space: its token covers the three bytes of the character.
    spans = span_check(*llama2, "llama2",
                       "a\xe2\x96\x81"
                       "b",
                       false, tally);
    std::size_t covered = 0;
    for (const TokenSpan& s : spans) covered = std::max(covered, s.end - s.start);
    REQUIRE(covered >= 3);
    REQUIRE(tally.metaspace_char + tally.inserted_space >= 1);
}
