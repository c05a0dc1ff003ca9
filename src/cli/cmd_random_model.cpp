// `plab random-model DIR`: writes a seeded random model (config.json +
// model.safetensors, and the tokenizer's files). assets/model started as one;
// tests make their own.
//
// What it teaches: a handful of integers fixes every shape (lessons/GLOSSARY.md):
// D, L, H, Hkv, Dh, F, V. A named --shape gives all of them; each flag
// overrides one. Shapes the model cannot have are refused before anything is
// written, with the flag named and what would be valid: heads that K/V heads
// do not divide (grouped-query attention shares each K/V head among H/Hkv query
// heads), an odd head dim (RoPE rotates pairs of dims), a vocabulary smaller
// than its tokenizer's (a prompt would name rows the embedding does not have).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/common.h"
#include "core/error.h"
#include "model/shapes.h"
#include "model/tokenizers/tokenizer_source.h"

namespace plab::cli {
namespace {
namespace fs = std::filesystem;

// Random models are for reading and timing the engine, not for filling the disk:
// 2^30 parameters is 4.3 GB as float32, ten times stories110m.
constexpr std::size_t kMaxRandomParams = std::size_t(1) << 30;

struct RandomModelOptions {
    std::string dir;
    std::string shape = "small";
    std::uint64_t seed = 1;
    int dim = 0, layers = 0, heads = 0, kv_heads = 0, hidden = 0, vocab = 0, head_dim = 0,
        max_seq_len = 0;
    double rope_theta = 0;
    std::string tokenizer;
    bool tied = false, untied = false;
    // The flags given on the command line (an option's count()).
    CLI::Option *dim_opt = nullptr, *layers_opt = nullptr, *heads_opt = nullptr,
                *kv_heads_opt = nullptr, *hidden_opt = nullptr, *vocab_opt = nullptr,
                *head_dim_opt = nullptr, *max_seq_len_opt = nullptr, *rope_theta_opt = nullptr;
};

bool given(const CLI::Option* o) {
    return o != nullptr && o->count() > 0;
}

// "--kv-heads 2" when the flag was given, else "--kv-heads 2 (the small shape's)".
std::string named(const char* flag, int value, const CLI::Option* o, const std::string& shape) {
    return std::string(flag) + " " + std::to_string(value) +
           (given(o) ? "" : " (the " + shape + " shape's)");
}

void check_range(const char* flag, int value, const CLI::Option* o, int max, const char* what) {
    if (!given(o)) return;
    PLAB_CHECK(value >= 1 && value <= max,
               flag << " " << value << " is out of range; " << what << " must be 1.." << max);
}

// The K/V head counts that divide `heads`: "1, 2, 4".
std::string divisors(int heads) {
    std::string out;
    for (int k = 1; k <= heads; ++k)
        if (heads % k == 0) out += (out.empty() ? "" : ", ") + std::to_string(k);
    return out;
}

// The shape: --shape, then each flag given; refused with one line naming the flag.
ModelConfig shape_of(const RandomModelOptions& o) {
    ModelConfig c = named_shape(o.shape);
    check_range("--dim", o.dim, o.dim_opt, ModelConfig::kMaxDim, "the model dim D");
    check_range("--layers", o.layers, o.layers_opt, ModelConfig::kMaxLayers, "the layer count L");
    check_range("--heads", o.heads, o.heads_opt, ModelConfig::kMaxHeads, "the query heads H");
    check_range("--kv-heads", o.kv_heads, o.kv_heads_opt, ModelConfig::kMaxHeads,
                "the K/V heads Hkv");
    check_range("--hidden", o.hidden, o.hidden_opt, ModelConfig::kMaxHidden,
                "the SwiGLU hidden dim F");
    check_range("--vocab", o.vocab, o.vocab_opt, ModelConfig::kMaxVocab, "the vocabulary V");
    check_range("--head-dim", o.head_dim, o.head_dim_opt, ModelConfig::kMaxHeadDim,
                "the head dim Dh");
    check_range("--max-seq-len", o.max_seq_len, o.max_seq_len_opt, ModelConfig::kMaxSeqLen,
                "max_seq_len");
    if (given(o.dim_opt)) c.dim = o.dim;
    if (given(o.layers_opt)) c.n_layers = o.layers;
    if (given(o.heads_opt)) c.n_heads = o.heads;
    if (given(o.kv_heads_opt)) c.n_kv_heads = o.kv_heads;
    if (given(o.hidden_opt)) c.hidden_dim = o.hidden;
    if (given(o.vocab_opt)) c.vocab_size = o.vocab;
    if (given(o.max_seq_len_opt)) c.max_seq_len = o.max_seq_len;

    // 1. Grouped-query attention: each K/V head serves H/Hkv query heads.
    const std::string heads = named("--heads", c.n_heads, o.heads_opt, o.shape);
    const std::string kv = named("--kv-heads", c.n_kv_heads, o.kv_heads_opt, o.shape);
    PLAB_CHECK(c.n_kv_heads <= c.n_heads, kv << " is more than " << heads
                                             << "; each K/V head serves a group of query "
                                             << "heads, so for " << c.n_heads
                                             << " heads --kv-heads may be " << divisors(c.n_heads));
    PLAB_CHECK(c.n_heads % c.n_kv_heads == 0,
               heads << " is not a multiple of " << kv << " (grouped-query attention shares "
                     << "each K/V head among heads/kv-heads query heads); for " << c.n_heads
                     << " heads --kv-heads may be " << divisors(c.n_heads));

    // 2. The head dim: given, or D / H when D or H changed (else the shape's).
    if (given(o.head_dim_opt)) {
        c.head_dim = o.head_dim;
        PLAB_CHECK(c.head_dim % 2 == 0,
                   "--head-dim " << c.head_dim << " is odd; RoPE rotates pairs of dims, so the "
                                 << "head dim must be even, e.g. " << c.head_dim - 1 << " or "
                                 << c.head_dim + 1);
    } else if (given(o.dim_opt) || given(o.heads_opt)) {
        const std::string dim = named("--dim", c.dim, o.dim_opt, o.shape);
        const int lower = c.dim / c.n_heads * c.n_heads, upper = lower + c.n_heads;
        PLAB_CHECK(c.dim % c.n_heads == 0,
                   dim << " is not divisible by " << heads << ", so there is no head dim D/H; "
                       << "give --head-dim (even), or a --dim that is a multiple of " << c.n_heads
                       << ", e.g. " << (lower > 0 ? std::to_string(lower) + " or " : "") << upper);
        c.head_dim = c.dim / c.n_heads;
        PLAB_CHECK(c.head_dim <= ModelConfig::kMaxHeadDim,
                   dim << " / " << heads << " gives head dim " << c.head_dim << ", above the "
                       << ModelConfig::kMaxHeadDim << " allowed; give more --heads or a "
                       << "--head-dim");
        const int step = 2 * c.n_heads;
        PLAB_CHECK(c.head_dim % 2 == 0,
                   dim << " / " << heads << " gives head dim " << c.head_dim
                       << ", which is odd (RoPE rotates pairs of dims); give --head-dim "
                       << c.head_dim + 1 << ", or a --dim that is a multiple of " << step
                       << ", e.g. "
                       << (c.dim / step > 0 ? std::to_string(c.dim / step * step) + " or " : "")
                       << (c.dim / step + 1) * step);
    }

    // 3. The classifier and RoPE.
    PLAB_CHECK(!(o.tied && o.untied), "--tied and --untied contradict each other; give one");
    if (o.tied) c.tied_embeddings = true;
    if (o.untied) c.tied_embeddings = false;
    if (given(o.rope_theta_opt)) {
        PLAB_CHECK(std::isfinite(o.rope_theta) && o.rope_theta > 1.0,
                   "--rope-theta " << o.rope_theta << " must be a finite number above 1 "
                                   << "(Llama 2 uses 10000, Llama 3 500000)");
        c.rope_theta = o.rope_theta;
    }
    return c;
}

// What `plab random-model` wrote, for its one line of text (it has no --json).
struct RandomModelResult {
    std::string dir;
    ModelConfig config;   // the shape written
    std::string shape;    // --shape, named when no flag changed it
    bool custom = false;  // a flag changed the shape, classifier, RoPE or tokenizer
    bool rope_theta_given = false;
    std::uint64_t seed = 1;
    std::string tokenizer;       // as config.json names it ("byte": the default)
    std::string tokenizer_kind;  // Tokenizer::kind()
};

// 4. The tokenizer, and the vocabulary it needs: its size unless --vocab says more.
void fit_random_model_vocab(const RandomModelOptions& o, const TokenizerSource& tok,
                            const std::string& spec, ModelConfig& c) {
    const int need = tok.tokenizer->vocab_size();
    if (!o.tokenizer.empty() && !given(o.vocab_opt)) c.vocab_size = need;
    PLAB_CHECK(!tok.exact_vocab || c.vocab_size == need,
               "--vocab " << c.vocab_size << " differs from " << spec << "'s " << need
                          << " tokens; a llama2.c tokenizer.bin holds exactly the model's "
                          << "vocab_size tokens (leave --vocab out)");
    PLAB_CHECK(c.vocab_size >= need,
               named("--vocab", c.vocab_size, o.vocab_opt, o.shape)
                   << " is smaller than the " << tok.tokenizer->kind() << " tokenizer's " << need
                   << " tokens (a prompt would name rows the embedding does not have); give "
                   << "--vocab " << need << " or more"
                   << (o.tokenizer.empty() ? ", or --tokenizer ids (prompts as token ids)"
                                           : ", or leave --vocab out"));
}

// 5. The folder: a tokenizer.json there that config.json would not name is
// refused when the model is loaded (model_io.cpp), so refuse it now.
void check_random_model_folder(const fs::path& dir, const TokenizerSource& tok) {
    PLAB_CHECK(!fs::exists(dir) || fs::is_directory(dir),
               dir.string() << " is a file; give a folder for the model");
    bool copies_json = false, copies_config = false;
    for (const auto& [from, name] : tok.files) {
        copies_json = copies_json || name == "tokenizer.json";
        copies_config = copies_config || name == "tokenizer_config.json";
    }
    PLAB_CHECK(copies_json || !fs::exists(dir / "tokenizer.json"),
               dir.string() << " already has a tokenizer.json, which this model (plab_tokenizer "
                            << tok.config_name << ") would not use; remove it, or pass "
                            << "--tokenizer " << (dir / "tokenizer.json").string());
    PLAB_CHECK(!copies_json || copies_config || !fs::exists(dir / "tokenizer_config.json"),
               dir.string() << " has a tokenizer_config.json that would be read with the new "
                            << "tokenizer.json (its BOS, EOS, add_bos_token); remove it");
}

RandomModelResult compute_random_model(const RandomModelOptions& o) {
    ModelConfig c = shape_of(o);
    const std::string spec = o.tokenizer.empty() ? "byte" : o.tokenizer;
    const TokenizerSource tok = open_tokenizer_source(spec, c.vocab_size);
    fit_random_model_vocab(o, tok, spec, c);
    c.validate();
    PLAB_CHECK(c.n_params() <= kMaxRandomParams,
               "this shape has " << c.n_params() << " parameters ("
                                 << double(c.n_params()) * 4 / 1e9
                                 << " GB as float32); plab random-model writes at most "
                                 << kMaxRandomParams << " (a smaller --dim, --layers, --hidden "
                                 << "or --vocab)");
    const fs::path dir(o.dir);
    check_random_model_folder(dir, tok);

    // 6. The weights, then the tokenizer's files beside them.
    save_model(make_random_weights(c, o.seed), tok.config_name, o.dir);
    for (const auto& [from, name] : tok.files) {
        const fs::path to = dir / name;
        if (fs::exists(to) && fs::equivalent(from, to)) continue;  // --tokenizer DIR/tokenizer.json
        fs::copy_file(from, to, fs::copy_options::overwrite_existing);
    }

    RandomModelResult r;
    r.dir = o.dir;
    r.config = c;
    r.shape = o.shape;
    r.custom = given(o.dim_opt) || given(o.layers_opt) || given(o.heads_opt) ||
               given(o.kv_heads_opt) || given(o.hidden_opt) || given(o.vocab_opt) ||
               given(o.head_dim_opt) || given(o.max_seq_len_opt) || given(o.rope_theta_opt) ||
               o.tied || o.untied || !o.tokenizer.empty();
    r.rope_theta_given = given(o.rope_theta_opt);
    r.seed = o.seed;
    r.tokenizer = tok.config_name;
    r.tokenizer_kind = tok.tokenizer->kind();
    return r;
}

void print_random_model_text(const RandomModelResult& r) {
    const ModelConfig& c = r.config;
    std::string extra;
    if (r.tokenizer != "byte") extra += ", tokenizer " + r.tokenizer_kind;
    if (r.custom) extra += c.tied_embeddings ? ", tied classifier" : ", separate classifier";
    if (r.rope_theta_given) extra += ", rope_theta " + exact(float(c.rope_theta));
    std::printf("wrote a random %smodel (%s%s, seed %llu) to %s\n",
                r.custom ? "" : (r.shape + " ").c_str(), c.summary().c_str(), extra.c_str(),
                static_cast<unsigned long long>(r.seed), r.dir.c_str());
}

void run(const RandomModelOptions& o) {
    print_random_model_text(compute_random_model(o));
}

}  // namespace

void add_random_model_command(CLI::App& app) {
    auto o = std::make_shared<RandomModelOptions>();
    CLI::App* cmd = app.add_subcommand("random-model", "write a seeded random model directory");
    cmd->add_option("dir", o->dir, "output directory")->required();
    cmd->add_option("--shape", o->shape,
                    "small, stories15m or stories110m: every field below; each flag overrides one")
        ->capture_default_str();
    cmd->add_option("--seed", o->seed, "random seed")->capture_default_str();
    o->dim_opt = cmd->add_option("--dim", o->dim, "model dim D");
    o->layers_opt = cmd->add_option("--layers", o->layers, "layers L");
    o->heads_opt = cmd->add_option("--heads", o->heads, "query heads H");
    o->kv_heads_opt =
        cmd->add_option("--kv-heads", o->kv_heads, "K/V heads Hkv (must divide --heads)");
    o->head_dim_opt = cmd->add_option("--head-dim", o->head_dim,
                                      "head dim Dh, even (default: D/H when --dim or --heads "
                                      "is given, else the shape's)");
    o->hidden_opt = cmd->add_option("--hidden", o->hidden, "SwiGLU hidden dim F");
    o->vocab_opt = cmd->add_option("--vocab", o->vocab,
                                   "vocabulary V (default: the tokenizer's size with --tokenizer)");
    o->max_seq_len_opt =
        cmd->add_option("--max-seq-len", o->max_seq_len, "longest prompt + generation");
    cmd->add_option("--tokenizer", o->tokenizer,
                    "byte (default), bpe (the shipped one), ids (prompts as token ids), or the "
                    "path of a tokenizer.json (or its folder), a *.bpe file or a llama2.c "
                    "tokenizer.bin: copied into DIR and named in config.json");
    cmd->add_flag("--tied", o->tied, "the classifier shares the embedding matrix");
    cmd->add_flag("--untied", o->untied, "a separate classifier (stories15m's shape is tied)");
    o->rope_theta_opt = cmd->add_option("--rope-theta", o->rope_theta, "RoPE base (default 10000)");
    cmd->callback([o] { run(*o); });
}

}  // namespace plab::cli
