// llama2.c checkpoints: reading, writing, RoPE row permutation.
// Format in llama2c.h; its tokenizer.bin is model/tokenizers/tokenizer_llama2c.cpp.
// Left out: the Q8_0 "v2" export (rejected by name).
#include "model/llama2c.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "model/binary_read.h"
#include "model/rope_permute.h"

namespace plab {
namespace {

constexpr std::uint32_t kMagicV1 = 0x616b3432u;  // "ak42" read as a little-endian uint32
constexpr std::size_t kV1HeaderBytes = 256;
constexpr std::size_t kLegacyHeaderBytes = 7 * 4;

// The 7 header ints, in file order.
struct Header {
    std::int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
};

Header header_at(std::span<const char> d, std::size_t off) {
    Header h;
    std::memcpy(&h, d.data() + off, sizeof h);
    return h;
}

bool header_plausible(const Header& h) {
    const auto ok = [](std::int32_t v, std::int32_t hi) { return v >= 1 && v <= hi; };
    return ok(h.dim, 1 << 16) && ok(h.hidden_dim, 1 << 18) && ok(h.n_layers, 4096) &&
           ok(h.n_heads, 4096) && ok(h.n_kv_heads, 4096) && h.vocab_size != 0 &&
           std::abs(static_cast<std::int64_t>(h.vocab_size)) <= (1 << 24) && ok(h.seq_len, 1 << 22);
}

ModelConfig config_from_header(const Header& h, const std::string& path) {
    PLAB_CHECK(header_plausible(h),
               path << ": header dim=" << h.dim << " hidden_dim=" << h.hidden_dim << " n_layers="
                    << h.n_layers << " n_heads=" << h.n_heads << " n_kv_heads=" << h.n_kv_heads
                    << " vocab_size=" << h.vocab_size << " seq_len=" << h.seq_len
                    << " is not a llama2.c checkpoint (expected dim 1..65536, hidden_dim "
                    << "1..262144, n_layers, n_heads and n_kv_heads 1..4096, |vocab_size| "
                    << "1..16777216, seq_len 1..4194304)");
    PLAB_CHECK(h.dim % h.n_heads == 0, path << ": dim " << h.dim << " is not a multiple of n_heads "
                                            << h.n_heads
                                            << "; llama2.c uses head_dim = dim / n_heads");
    ModelConfig c;
    c.dim = h.dim;
    c.hidden_dim = h.hidden_dim;
    c.n_layers = h.n_layers;
    c.n_heads = h.n_heads;
    c.n_kv_heads = h.n_kv_heads;
    c.head_dim = h.dim / h.n_heads;
    c.vocab_size = static_cast<int>(std::abs(static_cast<std::int64_t>(h.vocab_size)));
    c.max_seq_len = h.seq_len;
    c.rope_theta = 10000.0;  // implied by the format (run.c)
    c.norm_eps = 1e-5f;
    try {
        c.validate();
    } catch (const Error& e) {
        throw Error(path + ": " + e.what());
    }
    return c;
}

// Reads consecutive float tensors out of the file's data, in order.
class Cursor {
public:
    Cursor(std::span<const char> d, std::size_t off) : d_(d), off_(off) {}
    std::vector<float> take(std::size_t n) {
        PLAB_ASSERT(off_ + n * 4 <= d_.size());  // the total size was checked up front
        std::vector<float> v(n);
        std::memcpy(v.data(), d_.data() + off_, n * 4);
        off_ += n * 4;
        return v;
    }
    void skip(std::size_t n) { off_ += n * 4; }

private:
    std::span<const char> d_;
    std::size_t off_;
};

struct Sizes {
    std::size_t D, F, L, q, kv, V, T, half;
};

Sizes sizes_of(const ModelConfig& c) {
    return {std::size_t(c.dim),
            std::size_t(c.hidden_dim),
            std::size_t(c.n_layers),
            std::size_t(c.n_heads) * c.head_dim,
            std::size_t(c.n_kv_heads) * c.head_dim,
            std::size_t(c.vocab_size),
            std::size_t(c.max_seq_len),
            std::size_t(c.head_dim) / 2};
}

// Floats of everything but the classifier and the legacy freqs tables.
std::size_t body_floats(const Sizes& s) {
    const std::size_t per_layer = 2 * s.D + s.q * s.D + 2 * s.kv * s.D + s.D * s.q + 3 * s.F * s.D;
    return s.V * s.D + s.L * per_layer + s.D;
}

void split_layers(Cursor& cur, std::vector<LayerWeights>& layers, std::size_t n,
                  std::vector<float> LayerWeights::*field) {
    for (auto& l : layers) l.*field = cur.take(n);
}

void write_floats(std::ofstream& f, const std::vector<float>& v) {
    f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
}

}  // namespace

bool looks_like_llama2c(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    char buf[kLegacyHeaderBytes];
    if (!f.read(buf, sizeof buf)) return false;
    std::uint32_t magic;
    std::memcpy(&magic, buf, 4);
    if (magic == kMagicV1) return true;
    Header h;
    std::memcpy(&h, buf, sizeof h);
    return header_plausible(h);
}

Weights parse_llama2c_checkpoint(std::span<const char> d, const std::string& path,
                                 Llama2cInfo* info, const LoadLimits& limits) {
    PLAB_CHECK(d.size() >= kLegacyHeaderBytes,
               path << ": " << d.size() << " bytes is too short for a llama2.c checkpoint (the "
                    << "header alone is 28 bytes)");
    std::uint32_t magic;
    std::memcpy(&magic, d.data(), 4);
    Llama2cInfo meta;
    Header h;
    std::size_t data_off;
    if (magic == kMagicV1) {
        PLAB_CHECK(d.size() >= kV1HeaderBytes,
                   path << ": has the llama2.c v1 magic 'ak42' but only " << d.size()
                        << " bytes; the v1 header alone is 256 bytes (truncated file?)");
        meta.version = i32_at(d, 4);
        PLAB_CHECK(meta.version == 1, path << ": llama2.c version " << meta.version
                                           << " is not supported; only float32 version 1 and the "
                                              "legacy header are (export with --version 1)");
        h = header_at(d, 8);
        PLAB_CHECK(h.vocab_size > 0, path << ": v1 header has vocab_size " << h.vocab_size
                                          << ", expected a positive number");
        const unsigned char shared = static_cast<unsigned char>(d[36]);
        PLAB_CHECK(shared <= 1,
                   path << ": shared_classifier flag is " << int(shared) << ", expected 0 or 1");
        meta.shared_classifier = shared == 1;
        data_off = kV1HeaderBytes;
    } else {
        meta.version = 0;
        h = header_at(d, 0);
        meta.shared_classifier = h.vocab_size > 0;
        data_off = kLegacyHeaderBytes;
    }
    Weights w;
    w.config = config_from_header(h, path);
    w.config.tied_embeddings = meta.shared_classifier;
    const ModelConfig& c = w.config;
    const Sizes s = sizes_of(c);

    // 1. The header's claims fix the file size exactly; a lying header is caught here.
    std::size_t floats = body_floats(s) + (meta.shared_classifier ? 0 : s.V * s.D);
    if (meta.version == 0) floats += 2 * s.T * s.half;  // freqs_cos, freqs_sin
    const std::size_t want = data_off + floats * 4;
    PLAB_CHECK(d.size() == want, path << ": the header (" << c.summary()
                                      << (meta.shared_classifier ? ", shared" : ", separate")
                                      << " classifier, version " << meta.version << ") implies "
                                      << want << " bytes but the file has " << d.size()
                                      << (d.size() < want ? " (truncated?)" : " (header lies?)"));
    const std::size_t keep = 4 * (floats - (meta.version == 0 ? 2 * s.T * s.half : 0));
    PLAB_CHECK(keep <= limits.max_bytes, path << ": the weights need " << keep
                                              << " bytes, more than the " << limits.max_bytes
                                              << " bytes allowed (this machine's memory)");

    // 2. Tensors in the version's order.
    Cursor cur(d, data_off);
    w.layers.resize(s.L);
    if (meta.version == 1) {
        split_layers(cur, w.layers, s.D, &LayerWeights::attn_norm);
        split_layers(cur, w.layers, s.D, &LayerWeights::ffn_norm);
        w.final_norm = cur.take(s.D);
        w.tok_embeddings = cur.take(s.V * s.D);
    } else {
        w.tok_embeddings = cur.take(s.V * s.D);
        split_layers(cur, w.layers, s.D, &LayerWeights::attn_norm);
    }
    split_layers(cur, w.layers, s.q * s.D, &LayerWeights::wq);
    split_layers(cur, w.layers, s.kv * s.D, &LayerWeights::wk);
    split_layers(cur, w.layers, s.kv * s.D, &LayerWeights::wv);
    split_layers(cur, w.layers, s.D * s.q, &LayerWeights::wo);
    if (meta.version == 0) split_layers(cur, w.layers, s.D, &LayerWeights::ffn_norm);
    split_layers(cur, w.layers, s.F * s.D, &LayerWeights::w_gate);  // w1
    split_layers(cur, w.layers, s.D * s.F, &LayerWeights::w_down);  // w2
    split_layers(cur, w.layers, s.F * s.D, &LayerWeights::w_up);    // w3
    if (meta.version == 0) {
        w.final_norm = cur.take(s.D);
        cur.skip(2 * s.T * s.half);  // RoPE tables: the engine makes its own (core/rope.h)
    }
    if (!meta.shared_classifier) w.classifier = cur.take(s.V * s.D);

    // 3. Interleaved RoPE pairs -> the engine's half-split pairs.
    for (auto& l : w.layers) {
        l.wq = rope_rows_interleaved_to_half(l.wq, c.n_heads, c.head_dim, c.dim);
        l.wk = rope_rows_interleaved_to_half(l.wk, c.n_kv_heads, c.head_dim, c.dim);
    }
    try {
        w.validate();
    } catch (const Error& e) {
        throw Error(path + ": " + e.what());
    }
    if (info != nullptr) *info = meta;
    return w;
}

Weights read_llama2c_checkpoint(const std::string& path, Llama2cInfo* info,
                                const LoadLimits& limits) {
    const FileBytes file(path, "a readable llama2.c .bin file");
    return parse_llama2c_checkpoint(file.bytes(), path, info, limits);
}

void write_llama2c_checkpoint(const Weights& w, const std::string& path, int version) {
    w.validate();
    const ModelConfig& c = w.config;
    PLAB_CHECK(version == 0 || version == 1,
               "llama2.c version " << version << " cannot be written; use 0 (legacy) or 1");
    PLAB_CHECK(c.head_dim * c.n_heads == c.dim,
               "llama2.c checkpoints imply head_dim = dim / n_heads; this model has head_dim "
                   << c.head_dim << " with dim " << c.dim << " and " << c.n_heads
                   << " heads (save it as safetensors instead)");
    PLAB_CHECK(c.rope_theta == 10000.0,
               "llama2.c checkpoints imply rope_theta = 10000; this model has "
                   << c.rope_theta << " (save it as safetensors instead)");
    PLAB_CHECK(c.norm_eps == 1e-5f, "llama2.c checkpoints imply norm_eps = 1e-5; this model has "
                                        << c.norm_eps << " (save it as safetensors instead)");
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    PLAB_CHECK(f.good(), "cannot write " << path);
    const bool shared = c.tied_embeddings;
    const Sizes s = sizes_of(c);
    Header h{c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.max_seq_len};
    if (version == 1) {
        char header[kV1HeaderBytes] = {};
        const std::int32_t v = 1;
        std::memcpy(header, &kMagicV1, 4);
        std::memcpy(header + 4, &v, 4);
        std::memcpy(header + 8, &h, sizeof h);
        header[36] = shared ? 1 : 0;
        f.write(header, sizeof header);
    } else {
        if (!shared) h.vocab_size = -h.vocab_size;  // legacy: negative = separate classifier
        f.write(reinterpret_cast<const char*>(&h), sizeof h);
    }
    // Half-split rows -> llama2.c's interleaved rows.
    std::vector<std::vector<float>> wq, wk;
    for (const auto& l : w.layers) {
        wq.push_back(rope_rows_half_to_interleaved(l.wq, c.n_heads, c.head_dim, c.dim));
        wk.push_back(rope_rows_half_to_interleaved(l.wk, c.n_kv_heads, c.head_dim, c.dim));
    }
    auto each = [&](std::vector<float> LayerWeights::*field) {
        for (const auto& l : w.layers) write_floats(f, l.*field);
    };
    if (version == 1) {
        each(&LayerWeights::attn_norm);
        each(&LayerWeights::ffn_norm);
        write_floats(f, w.final_norm);
        write_floats(f, w.tok_embeddings);
    } else {
        write_floats(f, w.tok_embeddings);
        each(&LayerWeights::attn_norm);
    }
    for (const auto& m : wq) write_floats(f, m);
    for (const auto& m : wk) write_floats(f, m);
    each(&LayerWeights::wv);
    each(&LayerWeights::wo);
    if (version == 0) each(&LayerWeights::ffn_norm);
    each(&LayerWeights::w_gate);
    each(&LayerWeights::w_down);
    each(&LayerWeights::w_up);
    if (version == 0) {
        write_floats(f, w.final_norm);
        // freqs_cos / freqs_sin as llama2.c's model.py computes them (readers skip them).
        std::vector<float> cosv(s.T * s.half), sinv(s.T * s.half);
        for (std::size_t t = 0; t < s.T; ++t) {
            for (std::size_t i = 0; i < s.half; ++i) {
                const double a = double(t) * std::pow(c.rope_theta, -2.0 * double(i) / c.head_dim);
                cosv[t * s.half + i] = static_cast<float>(std::cos(a));
                sinv[t * s.half + i] = static_cast<float>(std::sin(a));
            }
        }
        write_floats(f, cosv);
        write_floats(f, sinv);
    }
    if (!shared) write_floats(f, w.classifier);
    PLAB_CHECK(f.good(), "failed writing " << path);
}

}  // namespace plab
