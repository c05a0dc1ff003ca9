// Fuzz harness: a Hugging Face tokenizer.json through HfTokenizer::parse
// (model/tokenizers/tokenizer_hf.h). Input: the tokenizer.json text, optionally followed
// by a NUL byte and a tokenizer_config.json text (JSON never holds a raw NUL).
// An accepted tokenizer must give ids inside its vocabulary for any bytes
// (multilingual text, ill-formed UTF-8, the file itself), BOS first when it
// adds one, and decode and show every id it gave. Seeds: the test tokenizers
// of tests/golden/hf_tokenizers/ (minified) and small hand-written files.
#include <string>

#include "fuzz_util.h"
#include "model/tokenizers/tokenizer_hf.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(plab::fuzz::as_text(data, size));
    const std::size_t nul = input.find('\0');
    const std::string file(input.substr(0, nul));
    const std::string config(nul == std::string_view::npos ? "" : input.substr(nul + 1));
    plab::fuzz::refusal_is_fine([&] {
        const auto tok = plab::HfTokenizer::parse(file, config, "fuzz");
        const std::string texts[] = {
            std::string("Once upon a time, they're 12345 \xF0\x9F\xA6\x80\n\n  \t x"),
            std::string("\xD0\x9F\xD1\x80\xD0\xB8 \xC3\xA6\xC3\xB8\xC3\xA5 \xE6\x9D\xB1 \xff\xc3 "
                        "\xed\xa0\x80 <s><|endoftext|>"),
            file};
        for (const std::string& text : texts) {
            // A text the NFC check refuses is a refusal too (plab::Error), not a crash.
            plab::fuzz::refusal_is_fine([&] {
                const std::vector<int32_t> ids = tok->encode(text, true);
                if (tok->bos_id() >= 0 && !ids.empty() && ids[0] != tok->bos_id()) {
                    // BOS is left out only when tokenizer_config.json says add_bos_token: false.
                    PLAB_FUZZ_REQUIRE(tok->encode("", true).empty());
                }
                for (int32_t id : ids) {
                    PLAB_FUZZ_REQUIRE(id >= 0 && id < tok->vocab_size());
                    tok->token_text(id);
                }
                tok->decode(ids);
            });
        }
    });
    return 0;
}
