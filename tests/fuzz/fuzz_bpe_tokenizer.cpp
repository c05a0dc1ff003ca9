// Fuzz harness: a "plab-bpe 1" tokenizer file through BpeTokenizer::parse
// (model/tokenizers/tokenizer_bpe.h). An accepted tokenizer must give any bytes back
// exactly: decode(encode(x)) == x, for a fixed text and for the file's own
// bytes. Seeds: assets/model/tokenizer.bpe and small variants.
#include <string>

#include "fuzz_util.h"
#include "model/tokenizers/tokenizer_bpe.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string file(plab::fuzz::as_text(data, size));
    plab::fuzz::refusal_is_fine([&] {
        const plab::BpeTokenizer tok = plab::BpeTokenizer::parse(file, "fuzz");
        for (const std::string& text : {std::string("Once upon a time, 42 cats\n\xff"), file}) {
            const std::vector<int32_t> ids = tok.encode(text, true);
            PLAB_FUZZ_REQUIRE(!ids.empty() && ids[0] == tok.bos_id());
            for (int32_t id : ids) PLAB_FUZZ_REQUIRE(id >= 0 && id < tok.vocab_size());
            PLAB_FUZZ_REQUIRE(tok.decode(ids) == text);
        }
    });
    return 0;
}
