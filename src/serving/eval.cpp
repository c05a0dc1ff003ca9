// Held-out evaluation: loss, next-token accuracy, templated completions and
// per-head induction / previous-token scores. See eval.h for the definitions.
// Everything runs through Session::prefill and its probes: the evaluation
// sees exactly what the engine computes, and recomputes no model math.
#include "serving/eval.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "core/random.h"
#include "runtime/chunk_plan.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace plab {
namespace {

std::vector<std::string> read_lines(const std::string& path) {
    std::ifstream f(path);
    PLAB_CHECK(f.good(),
               "cannot read held-out file " << path << " (written by assets/recipe/train.py)");
    std::vector<std::string> lines;
    std::string line;
    while (std::getline(f, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (!line.empty() && line[0] != '#') lines.push_back(line);
    }
    return lines;
}

// log-sum-exp in double: the loss of one row of logits for target t.
double cross_entropy(const float* logits, int vocab, int target) {
    double mx = logits[0];
    for (int i = 1; i < vocab; ++i) mx = std::max(mx, double(logits[i]));
    double sum = 0;
    for (int i = 0; i < vocab; ++i) sum += std::exp(double(logits[i]) - mx);
    return mx + std::log(sum) - double(logits[target]);
}

std::vector<AttentionProbe> all_heads(const ModelConfig& c) {
    std::vector<AttentionProbe> probes;
    for (int l = 0; l < c.n_layers; ++l)
        for (int h = 0; h < c.n_heads; ++h) probes.push_back({l, h});
    return probes;
}

// Session options with the eval's mask bound to this prompt (the model was
// trained causal: any other mask is an experiment whose cost the scores show).
SessionOptions masked_session(const DeviceModel& model, const Tokenizer& tok,
                              const std::string& mask, const std::vector<int32_t>& ids) {
    SessionOptions so;
    MaskContext mc;
    mc.tokens = ids;
    mc.bos_id = tok.bos_id();
    mc.n_heads = model.config().n_heads;
    so.mask = make_mask(mask, mc);
    return so;
}

// A full prefill of `ids` on a fresh session, with the attention map of every head.
PrefillResult prefill_probing_all_heads(const DeviceModel& model, const Tokenizer& tok,
                                        const std::string& mask, const std::vector<int32_t>& ids) {
    Session s(model, masked_session(model, tok, mask, ids));
    ForwardProbes probes;
    probes.attention = all_heads(model.config());
    return s.prefill(ids, ChunkPlan{{int(ids.size())}}, probes);
}

std::string tail_words(const std::string& s, std::size_t n_chars) {
    return s.size() <= n_chars ? s : "..." + s.substr(s.size() - n_chars);
}

// 1. Loss and next-token accuracy over whole stories ([BOS] story [EOS]).
void score_next_tokens(const DeviceModel& model, const Tokenizer& tok, const std::string& mask,
                       const std::vector<std::string>& stories, EvalReport& r) {
    const int V = model.config().vocab_size;
    double loss_sum = 0;
    long long correct = 0;
    for (const std::string& story : stories) {
        std::vector<int32_t> ids = tok.encode(story, true);
        ids.push_back(tok.eos_id());
        if (int(ids.size()) > model.config().max_seq_len) ids.resize(model.config().max_seq_len);
        Session s(model, masked_session(model, tok, mask, ids));
        ForwardProbes probes;
        probes.all_logits = true;
        const PrefillResult p = s.prefill(ids, parse_chunk_plan("full", int(ids.size())), probes);
        for (std::size_t t = 0; t + 1 < ids.size(); ++t) {
            const float* row = p.all_logits.data() + t * std::size_t(V);
            loss_sum += cross_entropy(row, V, ids[t + 1]);
            correct += argmax(std::span<const float>(row, std::size_t(V))) == ids[t + 1];
            ++r.n_predictions;
        }
        ++r.n_stories;
    }
    if (r.n_predictions > 0) {
        r.loss = loss_sum / double(r.n_predictions);
        r.next_token_accuracy = double(correct) / double(r.n_predictions);
    }
}

// 2. Templated completions: greedy continuation must reproduce the answer's tokens.
void score_completions(const DeviceModel& model, const Tokenizer& tok, const std::string& mask,
                       const std::vector<std::string>& lines, int max_n, EvalReport& r) {
    const int V = model.config().vocab_size;
    for (const std::string& line : lines) {
        if (r.completions_total >= max_n) break;
        std::istringstream ls(line);
        std::string family, prompt, answer;
        PLAB_CHECK(std::getline(ls, family, '\t') && std::getline(ls, prompt, '\t') &&
                       std::getline(ls, answer),
                   "completion line '" << tail_words(line, 60)
                                       << "' is not 'family<TAB>prompt<TAB>answer'");
        const std::vector<int32_t> want = tok.encode(answer, false);
        PLAB_CHECK(!want.empty(),
                   "completion answer is empty in line '" << tail_words(line, 60) << "'");
        const std::vector<int32_t> ids = tok.encode(prompt, true);
        Session s(model, masked_session(model, tok, mask, ids));
        std::vector<float> logits =
            s.prefill(ids, parse_chunk_plan("full", int(ids.size()))).last_logits;
        std::vector<int32_t> got;
        for (std::size_t i = 0; i < want.size(); ++i) {
            got.push_back(argmax(std::span<const float>(logits.data(), std::size_t(V))));
            if (got.back() != want[i]) break;
            if (i + 1 < want.size()) logits = s.decode_step(got.back());
        }
        const bool ok = got == want;
        auto it = std::find_if(r.families.begin(), r.families.end(),
                               [&](const CompletionFamily& f) { return f.family == family; });
        if (it == r.families.end()) it = r.families.insert(r.families.end(), {family, 0, 0});
        it->correct += ok;
        ++it->total;
        r.completions_correct += ok;
        ++r.completions_total;
        if (!ok && r.wrong.size() < 5)
            r.wrong.push_back({tail_words(prompt, 50), answer, tok.decode(got)});
    }
}

// 3a. Induction: [BOS] s s with s random distinct "ordinary" tokens.
void score_induction(const DeviceModel& model, const Tokenizer& tok, const EvalOptions& o,
                     std::vector<HeadScore>& heads) {
    const ModelConfig& c = model.config();
    std::vector<int32_t> pool;
    const int lo = tok.kind() == "bpe" ? 258 : 0;  // BPE: merged tokens, i.e. word-like pieces
    for (int id = lo; id < std::min(c.vocab_size, tok.vocab_size()); ++id)
        if (id != tok.bos_id() && id != tok.eos_id()) pool.push_back(id);
    // Without a BOS token the sequence starts with one more pool token (pool[n]), which must
    // exist and stay distinct from s: keep one token of the pool in reserve for it.
    const int spare = tok.bos_id() >= 0 ? 0 : 1;
    const int n = std::min({o.induction_len, int(pool.size()) - spare, (c.max_seq_len - 1) / 2});
    PLAB_CHECK(n >= 2, "induction test needs at least 2 ordinary tokens and max_seq_len >= 5");
    random::Engine rng(o.seed);
    std::vector<double> sum(heads.size(), 0.0);
    for (int trial = 0; trial < o.induction_trials; ++trial) {
        random::shuffle(pool.begin(), pool.end(), rng);
        std::vector<int32_t> ids{tok.bos_id() >= 0 ? tok.bos_id() : pool[n]};
        ids.insert(ids.end(), pool.begin(), pool.begin() + n);
        ids.insert(ids.end(), pool.begin(), pool.begin() + n);
        const PrefillResult p = prefill_probing_all_heads(model, tok, o.mask, ids);
        // Query at 1+n+i holds s_i; its earlier copy sits at 1+i, so the target key is 2+i.
        for (std::size_t h = 0; h < heads.size(); ++h) {
            AttentionMean trial_mean;
            add_induction_attention(p.attention[h], ids, trial_mean);
            PLAB_ASSERT(trial_mean.count == n);
            sum[h] += trial_mean.value();
        }
    }
    for (std::size_t h = 0; h < heads.size(); ++h) heads[h].induction = sum[h] / o.induction_trials;
}

// 3b. Previous token: mean attention on key t-1 from query t >= 1, on held-out stories.
void score_previous_token(const DeviceModel& model, const Tokenizer& tok, const std::string& mask,
                          const std::vector<std::string>& stories, std::vector<HeadScore>& heads) {
    const ModelConfig& c = model.config();
    std::vector<AttentionMean> mean(heads.size());
    for (const std::string& story : stories) {
        std::vector<int32_t> ids = tok.encode(story, true);
        if (int(ids.size()) > c.max_seq_len) ids.resize(c.max_seq_len);
        if (ids.size() < 2) continue;
        const PrefillResult p = prefill_probing_all_heads(model, tok, mask, ids);
        for (std::size_t h = 0; h < heads.size(); ++h)
            add_previous_token_attention(p.attention[h], mean[h]);
    }
    for (std::size_t h = 0; h < heads.size(); ++h) heads[h].previous_token = mean[h].value();
}

// Every probe map is (n_queries, n_keys) and causal: its keys reach the last query.
void check_attention_map(const AttentionMap& m) {
    PLAB_CHECK(m.query_pos0 >= 0 && m.n_queries >= 0 && m.query_pos0 + m.n_queries <= m.n_keys &&
                   m.probs.size() == std::size_t(m.n_queries) * std::size_t(m.n_keys),
               "attention map of " << m.n_queries << " queries from position " << m.query_pos0
                                   << " over " << m.n_keys << " keys holds " << m.probs.size()
                                   << " weights; a causal map needs query_pos0 + n_queries <= "
                                      "n_keys and n_queries * n_keys weights");
}

}  // namespace

void add_previous_token_attention(const AttentionMap& m, AttentionMean& mean) {
    check_attention_map(m);
    for (int i = 0; i < m.n_queries; ++i) {
        const int t = m.query_pos0 + i;
        if (t < 1) continue;  // position 0 has no previous token
        mean.sum += m.probs[std::size_t(i) * m.n_keys + (t - 1)];
        ++mean.count;
    }
}

void add_induction_attention(const AttentionMap& m, const std::vector<int32_t>& ids,
                             AttentionMean& mean) {
    check_attention_map(m);
    const int end = m.query_pos0 + m.n_queries;
    PLAB_CHECK(int(ids.size()) >= end, "induction score: " << ids.size()
                                                           << " token ids for a map whose last "
                                                              "query is at position "
                                                           << end - 1);
    // Walk the positions in order, remembering where each token was last seen:
    // a query whose token was seen at p should attend to p+1 (<= the query).
    std::unordered_map<int32_t, int> last_seen;
    for (int t = 0; t < end; ++t) {
        const auto seen = last_seen.find(ids[t]);
        if (t >= m.query_pos0 && seen != last_seen.end()) {
            mean.sum += m.probs[std::size_t(t - m.query_pos0) * m.n_keys + (seen->second + 1)];
            ++mean.count;
        }
        last_seen[ids[t]] = t;
    }
}

EvalOptions default_eval_options(const std::string& model_dir) {
    namespace fs = std::filesystem;
    fs::path dir(model_dir);
    if (!fs::is_directory(dir)) dir = dir.parent_path();
    EvalOptions o;
    if (fs::exists(dir / "eval" / "heldout.txt"))
        o.heldout_path = (dir / "eval" / "heldout.txt").string();
    if (fs::exists(dir / "eval" / "completions.tsv"))
        o.completions_path = (dir / "eval" / "completions.tsv").string();
    return o;
}

EvalReport evaluate(const DeviceModel& model, const Tokenizer& tok, const EvalOptions& o) {
    PLAB_CHECK(o.max_stories >= 0 && o.max_completions >= 0 && o.induction_trials >= 1 &&
                   o.induction_len >= 2,
               "eval options: counts must be >= 0, induction trials >= 1 and length >= 2");
    const ModelConfig& c = model.config();
    EvalReport r;
    std::vector<std::string> stories;
    if (!o.heldout_path.empty()) {
        stories = read_lines(o.heldout_path);
        PLAB_CHECK(!stories.empty(), o.heldout_path << " has no stories (one per line expected)");
        std::vector<std::string> scored(
            stories.begin(),
            stories.begin() + std::min<std::size_t>(stories.size(), o.max_stories));
        score_next_tokens(model, tok, o.mask, scored, r);
    }
    if (!o.completions_path.empty()) {
        score_completions(model, tok, o.mask, read_lines(o.completions_path), o.max_completions, r);
    }
    for (const AttentionProbe& p : all_heads(c)) r.heads.push_back({p.layer, p.head, 0, 0});
    score_induction(model, tok, o, r.heads);
    if (!stories.empty()) {
        std::vector<std::string> few(
            stories.begin(),
            stories.begin() + std::min<std::size_t>(stories.size(), o.prev_token_stories));
        score_previous_token(model, tok, o.mask, few, r.heads);
    }
    auto by = [&](double HeadScore::*field) {
        return *std::max_element(
            r.heads.begin(), r.heads.end(),
            [&](const HeadScore& a, const HeadScore& b) { return a.*field < b.*field; });
    };
    r.best_induction = by(&HeadScore::induction);
    r.best_previous_token = by(&HeadScore::previous_token);
    return r;
}

}  // namespace plab
