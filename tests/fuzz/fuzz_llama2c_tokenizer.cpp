// Fuzz harness: llama2.c's tokenizer.bin through Llama2cTokenizer::parse, then
// encoding and decoding. The file does not store its vocabulary size (the
// model does), so the input's first two bytes choose it (1..65536) and the
// rest is the file. An accepted tokenizer must encode any text into ids of its
// vocabulary and decode them again. Seeds: corpus/llama2c_tokenizer/.
#include <string>

#include "fuzz_util.h"
#include "model/tokenizers/tokenizer_llama2c.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return 0;
    const int vocab = 1 + (data[0] | data[1] << 8);
    plab::fuzz::refusal_is_fine([&] {
        const plab::Llama2cTokenizer tok =
            plab::Llama2cTokenizer::parse(plab::fuzz::as_bytes(data + 2, size - 2), vocab, "fuzz");
        PLAB_FUZZ_REQUIRE(tok.vocab_size() == vocab);
        // Text with ASCII, a 2-byte and a 4-byte UTF-8 character, and a stray byte.
        const std::string text = "Once upon a time, \xc3\xa9t\xc3\xa9 \xf0\x9f\x99\x82 42\xff";
        const std::vector<int32_t> ids = tok.encode(text, true);
        for (int32_t id : ids) PLAB_FUZZ_REQUIRE(id >= 0 && id < vocab);
        (void)tok.decode(ids);
        for (int32_t id : ids) (void)tok.token_text(id);
    });
    return 0;
}
