// Tokenizers named on the command line (tokenizer_source.h).
#include "model/tokenizers/tokenizer_source.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "model/binary_read.h"
#include "model/tokenizers/tokenizer_bpe.h"
#include "model/tokenizers/tokenizer_hf.h"
#include "model/tokenizers/tokenizer_ids.h"
#include "model/tokenizers/tokenizer_llama2c.h"

namespace plab {
namespace fs = std::filesystem;
namespace {

constexpr const char* kValidSpecs =
    "byte, bpe, ids, or the path of a tokenizer.json (or a folder holding one), a *.bpe file "
    "or a llama2.c tokenizer.bin";

std::string read_json_file(const fs::path& p) {
    std::error_code ec;
    const auto size = fs::file_size(p, ec);
    PLAB_CHECK(
        !ec && size <= HfTokenizer::kMaxFileBytes,
        p.string() << ": cannot read, or larger than " << HfTokenizer::kMaxFileBytes << " bytes");
    std::ifstream f(p, std::ios::binary);
    PLAB_CHECK(f.good(), "cannot read " << p.string());
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// A tokenizer.bin does not store how many tokens it holds (llama2.c takes the
// count from the checkpoint): walk its entries to the end of the file.
int count_llama2c_tokens(const std::string& path) {
    const FileBytes file(path, "a readable llama2.c tokenizer.bin");
    const std::span<const char> d = file.bytes();
    PLAB_CHECK(d.size() >= 4, path << ": too short for a llama2.c tokenizer.bin");
    const std::int32_t max_len = i32_at(d, 0);
    PLAB_CHECK(max_len > 0 && max_len <= 4096, path << ": max_token_length " << max_len
                                                    << " is not in 1..4096; not a tokenizer.bin");
    int n = 0;
    std::size_t off = 4;
    while (off < d.size()) {
        PLAB_CHECK(off + 8 <= d.size() && n < (1 << 22),
                   path << ": token " << n << " is cut off; not a whole tokenizer.bin");
        const std::int32_t len = i32_at(d, off + 4);
        PLAB_CHECK(len >= 0 && len <= max_len && off + 8 + std::size_t(len) <= d.size(),
                   path << ": token " << n << " claims " << len << " bytes (max_token_length "
                        << max_len << ", " << d.size() - off - 8 << " bytes left)");
        off += 8 + std::size_t(len);
        ++n;
    }
    return n;
}

}  // namespace

TokenizerSource open_tokenizer_source(const std::string& spec, int ids_vocab) {
    TokenizerSource s;
    if (spec == "byte") {
        s.tokenizer = std::make_unique<ByteTokenizer>();
        s.config_name = "byte";
        return s;
    }
    if (spec == "ids") {
        PLAB_CHECK(ids_vocab > 0,
                   "--tokenizer ids has no vocabulary of its own; it is for a "
                   "model folder (plab random-model --tokenizer ids --vocab V)");
        s.tokenizer = std::make_unique<IdTokenizer>(ids_vocab, -1, -1);
        s.config_name = "ids";
        return s;
    }
    fs::path path =
        spec == "bpe" ? fs::path(PLAB_ASSETS_DIR) / "model" / "tokenizer.bpe" : fs::path(spec);
    PLAB_CHECK(fs::exists(path),
               "--tokenizer " << spec << ": no such file or folder; valid: " << kValidSpecs);
    if (fs::is_directory(path)) {
        PLAB_CHECK(fs::exists(path / "tokenizer.json"),
                   "--tokenizer " << spec << " is a folder without a tokenizer.json; valid: "
                                  << kValidSpecs);
        path /= "tokenizer.json";
    }
    const std::string ext = path.extension().string();
    if (ext == ".json") {
        const fs::path config = path.parent_path() / "tokenizer_config.json";
        const bool has_config = fs::exists(config) && path.filename() != "tokenizer_config.json";
        s.tokenizer =
            HfTokenizer::parse(read_json_file(path),
                               has_config ? read_json_file(config) : std::string(), path.string());
        s.config_name = "tokenizer.json";
        s.files.emplace_back(path.string(), "tokenizer.json");
        if (has_config) s.files.emplace_back(config.string(), "tokenizer_config.json");
    } else if (ext == ".bpe") {
        s.tokenizer = std::make_unique<BpeTokenizer>(BpeTokenizer::load(path.string()));
        s.config_name = "tokenizer.bpe";
        s.files.emplace_back(path.string(), "tokenizer.bpe");
    } else if (ext == ".bin") {
        const int n = count_llama2c_tokens(path.string());
        s.tokenizer = std::make_unique<Llama2cTokenizer>(Llama2cTokenizer::load(path.string(), n));
        s.config_name = "tokenizer.bin";
        s.files.emplace_back(path.string(), "tokenizer.bin");
        s.exact_vocab = true;
    } else {
        PLAB_CHECK(false, "--tokenizer " << spec << ": '" << path.filename().string()
                                         << "' is no tokenizer plab reads; valid: " << kValidSpecs);
    }
    return s;
}

}  // namespace plab
