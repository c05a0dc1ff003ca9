#include "runtime/mask_grammar.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "core/error.h"

namespace plab {
namespace {

// A whole-string integer; `what` names it in the message.
int parse_int(std::string_view text, std::string_view item, const char* what) {
    int value = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    PLAB_CHECK(!text.empty() && ec == std::errc() && ptr == end,
               "mask item '" << item << "': " << what << " '" << text
                             << "' is not a whole number; write e.g. window:8");
    return value;
}

int parse_positive(std::string_view text, std::string_view item, const char* what) {
    const int v = parse_int(text, item, what);
    PLAB_CHECK(v >= 1, "mask item '" << item << "': " << what << " must be at least 1, got " << v);
    // Far beyond any max_seq_len, and small enough that W*D cannot overflow.
    PLAB_CHECK(v <= 1000000,
               "mask item '" << item << "': " << what << " must be at most 1000000, got " << v);
    return v;
}

std::vector<std::string_view> split(std::string_view text, char sep) {
    std::vector<std::string_view> out;
    std::size_t start = 0;
    while (true) {
        const std::size_t at = text.find(sep, start);
        out.push_back(text.substr(start, at == std::string_view::npos ? at : at - start));
        if (at == std::string_view::npos) break;
        start = at + 1;
    }
    return out;
}

// One item as written, split at its first ':'.
struct ItemText {
    std::string_view item, kind, arg;
    bool has_arg = false;
    void needs_arg(const char* example) const {
        PLAB_CHECK(has_arg && !arg.empty(),
                   "mask item '" << item << "' needs a value, e.g. " << example);
    }
};
using Sinks = std::vector<std::pair<int, std::string>>;

// Each kind's reader fills `m` and returns true for a mask item; a sink goes to
// its group's window and a modifier to the whole spec (both return false).
bool read_causal(const ItemText& t, MaskSpec&, Sinks&, MaskItem& m) {
    PLAB_CHECK(!t.has_arg, "mask item '" << t.item << "': causal takes no value; write causal");
    m.kind = MaskKind::causal;
    return true;
}

bool read_window(const ItemText& t, MaskSpec&, Sinks&, MaskItem& m) {
    t.needs_arg("window:8");
    m.kind = MaskKind::window;
    m.a = parse_positive(t.arg, t.item, "the window W");
    return true;
}

bool read_sink(const ItemText& t, MaskSpec&, Sinks& sinks, MaskItem&) {
    t.needs_arg("window:8+sink:2");
    const int s = parse_positive(t.arg, t.item, "the number of sinks S");
    sinks.emplace_back(s, std::string(t.item));
    return false;
}

bool read_dilated(const ItemText& t, MaskSpec&, Sinks&, MaskItem& m) {
    t.needs_arg("dilated:4,2 (4 keys, every 2nd)");
    const auto parts = split(t.arg, ',');
    PLAB_CHECK(parts.size() == 2, "mask item '" << t.item
                                                << "' needs two values W,D (W keys spaced D "
                                                   "apart), e.g. dilated:4,2");
    m.kind = MaskKind::dilated;
    m.a = parse_positive(parts[0], t.item, "the number of keys W");
    m.b = parse_positive(parts[1], t.item, "the spacing D");
    return true;
}

bool read_chunked(const ItemText& t, MaskSpec&, Sinks&, MaskItem& m) {
    t.needs_arg("chunked:16");
    m.kind = MaskKind::chunked;
    m.a = parse_positive(t.arg, t.item, "the chunk size L");
    return true;
}

bool read_prefix(const ItemText& t, MaskSpec&, Sinks&, MaskItem& m) {
    t.needs_arg("prefix:6");
    m.kind = MaskKind::prefix;
    m.a = parse_positive(t.arg, t.item, "the prefix length P");
    return true;
}

bool read_docs(const ItemText& t, MaskSpec&, Sinks&, MaskItem& m) {
    t.needs_arg("docs:5,7,3 or docs:bos");
    m.kind = MaskKind::docs;
    if (t.arg == "bos") {
        m.split_at_bos = true;
    } else {
        for (std::string_view part : split(t.arg, ','))
            m.lengths.push_back(parse_positive(part, t.item, "a document length"));
    }
    return true;
}

bool read_file(const ItemText& t, MaskSpec&, Sinks&, MaskItem& m) {
    t.needs_arg("file:mask.txt");
    m.kind = MaskKind::custom;
    m.path = std::string(t.arg);
    return true;
}

bool read_alibi(const ItemText& t, MaskSpec& spec, Sinks&, MaskItem&) {
    PLAB_CHECK(!t.has_arg, "mask item '" << t.item
                                         << "': alibi takes no value (the slopes follow from "
                                            "the number of heads); write alibi");
    PLAB_CHECK(!spec.alibi, "mask spec '" << spec.text << "' names alibi twice; once is enough");
    spec.alibi = true;
    return false;
}

bool read_softcap(const ItemText& t, MaskSpec& spec, Sinks&, MaskItem&) {
    t.needs_arg("softcap:30");
    PLAB_CHECK(spec.softcap == 0.0f,
               "mask spec '" << spec.text << "' names softcap twice; give one cap");
    const std::string s(t.arg);
    char* end = nullptr;
    const double cap = std::strtod(s.c_str(), &end);
    PLAB_CHECK(end == s.c_str() + s.size() && std::isfinite(cap) && cap > 0 && cap < 1e30,
               "mask item '" << t.item << "': the cap must be a positive number, e.g. softcap:30");
    spec.softcap = static_cast<float>(cap);
    return false;
}

struct MaskItemRow {
    MaskItemKind kind;
    bool (*read)(const ItemText&, MaskSpec&, Sinks&, MaskItem&);
};

// The table of item kinds: the grammar's help, the list in messages and the
// parser all read it. Adding a kind: a row here, its MaskKind and its
// visibility in core/mask.h, and its test (src/runtime/README.md).
// clang-format off
const MaskItemRow kMaskItems[] = {
    {{"causal", "causal", false,
      "  causal          query q sees keys 0..q (the default)\n"}, read_causal},
    {{"window", "window:W", false,
      "  window:W        the last W keys, itself included: q-W < k <= q (Mistral, Gemma local layers)\n"},
     read_window},
    {{"sink", "sink:S", false,
      "  sink:S          beside a window in its group (window:8+sink:2): keys 0..S-1 stay visible\n"
      "                  (attention sinks, StreamingLLM)\n"}, read_sink},
    {{"dilated", "dilated:W,D", false,
      "  dilated:W,D     W keys spaced D apart: q, q-D, ..., q-(W-1)D (Longformer)\n"}, read_dilated},
    {{"chunked", "chunked:L", false,
      "  chunked:L       causal inside chunks of L positions (Llama 4 local layers)\n"}, read_chunked},
    {{"prefix", "prefix:P", false,
      "  prefix:P        positions 0..P-1 see each other both ways (prefix-LM, PaliGemma);\n"
      "                  a chunk plan may not split the prefix\n"}, read_prefix},
    {{"docs", "docs:N1,N2,..., docs:bos", false,
      "  docs:N1,N2,...  packed documents of these lengths (they must sum to the prompt):\n"
      "                  causal inside a document, nothing across\n"
      "  docs:bos        a new document at every BOS token of the prompt\n"}, read_docs},
    {{"file", "file:PATH", false,
      "  file:PATH       a T x T matrix of 0/1, one row per query ('0110' or '0 1 1 0';\n"
      "                  '#' comments and blank lines skipped; every row needs a 1)\n"}, read_file},
    {{"alibi", "alibi", true,
      "  alibi           modifier: adds -slope_h * |q - k| to each score (Press et al. 2022)\n"},
     read_alibi},
    {{"softcap", "softcap:C", true,
      "  softcap:C       modifier: score -> C * tanh(score / C) (Gemma 2)\n"}, read_softcap},
};
// clang-format on

// "causal, window:W, ...": every form, for the message about an unknown kind.
std::string known_kinds() {
    std::string out;
    for (const MaskItemRow& r : kMaskItems)
        out += (out.empty() ? "" : ", ") + std::string(r.kind.forms);
    return out;
}

// One item; modifiers go to the spec, sinks to their group's window (done by the caller).
void parse_item(std::string_view item, bool new_group, MaskSpec& spec, Sinks& sinks) {
    PLAB_CHECK(!item.empty(), "mask spec '" << spec.text
                                            << "' has an empty item (two operators in a row, "
                                               "or one at an end); write e.g. window:8+sink:2");
    const std::size_t colon = item.find(':');
    ItemText t;
    t.item = item;
    t.kind = item.substr(0, colon);
    t.has_arg = colon != std::string_view::npos;
    t.arg = t.has_arg ? item.substr(colon + 1) : std::string_view{};
    for (const MaskItemRow& r : kMaskItems) {
        if (t.kind != r.kind.name) continue;
        MaskItem m;
        m.new_group = new_group;
        m.text = std::string(item);
        if (r.read(t, spec, sinks, m)) spec.items.push_back(std::move(m));
        return;
    }
    PLAB_CHECK(false, "unknown mask kind '" << t.kind << "' in '" << spec.text
                                            << "'; known: " << known_kinds());
}

bool is_modifier(std::string_view item) {
    const std::string_view kind = item.substr(0, item.find(':'));
    for (const MaskItemRow& r : kMaskItems)
        if (kind == r.kind.name) return r.kind.modifier;
    return false;
}

}  // namespace

std::vector<MaskItemKind> mask_item_kinds() {
    std::vector<MaskItemKind> out;
    for (const MaskItemRow& r : kMaskItems) out.push_back(r.kind);
    return out;
}

std::string mask_grammar_help() {
    std::string out =
        "Mask grammar (the same for --mask on prefill, generate, compare, toy, bench, eval):\n"
        "  spec  := group ( '|' group )*     OR of groups (FlexAttention's or_masks)\n"
        "  group := item ( '+' item )*       AND of the group's masks (and_masks)\n";
    for (const MaskItemRow& r : kMaskItems) out += r.kind.help;
    return out +
           "Modifiers apply to the whole mask wherever written. Examples:\n"
           "  window:8+sink:2    chunked:16|prefix:4    docs:5,7,3+alibi    causal+softcap:30";
}

MaskSpec parse_mask_spec(std::string_view text) {
    MaskSpec spec;
    spec.text = std::string(text);
    PLAB_CHECK(!text.empty(), "empty mask spec; write e.g. causal, window:8 or prefix:6");
    for (char ch : text) {
        PLAB_CHECK(ch != ' ' && ch != '\t' && ch != '\n',
                   "mask spec '" << text
                                 << "' contains a space; join items with + (and) or | (or), "
                                    "e.g. window:8+sink:2");
    }
    const std::vector<std::string_view> groups = split(text, '|');
    for (std::size_t g = 0; g < groups.size(); ++g) {
        const std::size_t items_before = spec.items.size();
        Sinks sinks;
        const std::vector<std::string_view> items = split(groups[g], '+');
        bool only_modifiers = true;
        for (std::string_view item : items) {
            only_modifiers = only_modifiers && is_modifier(item);
            parse_item(item, g > 0 && spec.items.size() == items_before, spec, sinks);
        }
        PLAB_CHECK(!(only_modifiers && groups.size() > 1),
                   "mask spec '" << text << "': the OR group '" << groups[g]
                                 << "' has no mask, only modifiers; modifiers apply to the whole "
                                    "mask, so join them with +, e.g. window:8|prefix:4+alibi");
        // Sinks belong to the window of their group: window:W+sink:S.
        PLAB_CHECK(sinks.size() <= 1, "mask spec '" << text
                                                    << "' gives two sink counts in one group; "
                                                       "write one, e.g. window:8+sink:2");
        if (!sinks.empty()) {
            MaskItem* window = nullptr;
            for (std::size_t i = items_before; i < spec.items.size(); ++i) {
                if (spec.items[i].kind == MaskKind::window) window = &spec.items[i];
            }
            PLAB_CHECK(window != nullptr,
                       "mask item '" << sinks[0].second
                                     << "' needs a window to attach to (sinks keep the first keys "
                                        "visible beside a sliding window); write e.g. window:8+"
                                     << sinks[0].second);
            window->b = sinks[0].first;
            window->text += "+" + sinks[0].second;
        }
    }
    PLAB_CHECK(static_cast<int>(spec.items.size()) <= Mask::kMaxTerms,
               "mask spec '" << text << "' combines " << spec.items.size() << " masks; at most "
                             << Mask::kMaxTerms << " can be combined");
    return spec;
}

BoundMask::BoundMask(std::string spec, Mask mask, std::vector<uint32_t> words)
    : spec_(std::move(spec)), mask_(mask), words_(std::move(words)) {
    mask_.data = nullptr;
    mask_.data_words = static_cast<int32_t>(words_.size());
}

Mask BoundMask::view() const {
    Mask m = mask_;
    m.data = words_.empty() ? nullptr : words_.data();
    return m;
}

std::vector<double> alibi_slopes(int n_heads) {
    PLAB_ASSERT(n_heads >= 1);
    auto power_of_two = [](int n) {
        std::vector<double> s;
        for (int i = 1; i <= n; ++i) s.push_back(std::pow(2.0, -8.0 * i / n));
        return s;
    };
    int closest = 1;
    while (closest * 2 <= n_heads) closest *= 2;
    std::vector<double> slopes = power_of_two(closest);
    if (closest < n_heads) {
        const std::vector<double> extra = power_of_two(2 * closest);
        for (int i = 0; static_cast<int>(slopes.size()) < n_heads; i += 2)
            slopes.push_back(extra[i]);
    }
    return slopes;
}

namespace {

std::vector<std::vector<bool>> read_custom_mask(const std::string& path, int n_tokens) {
    PLAB_CHECK(!std::filesystem::is_directory(path),
               "mask file " << path << " is a directory; give a text file of 0/1 rows");
    std::ifstream f(path);
    PLAB_CHECK(f.good(), "cannot read mask file " << path
                                                  << "; give a text file with one row of 0/1 per "
                                                     "prompt token");
    std::ostringstream text;
    text << f.rdbuf();
    return parse_custom_mask(text.str(), n_tokens, path);
}

}  // namespace

std::vector<std::vector<bool>> parse_custom_mask(std::string_view text, int n_tokens,
                                                 const std::string& path) {
    std::istringstream f{std::string(text)};
    std::vector<std::vector<bool>> rows;
    std::string line;
    int line_no = 0;
    while (std::getline(f, line)) {
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        const std::size_t first = line.find_first_not_of(" \t");
        if (first == std::string::npos || line[first] == '#') continue;
        std::vector<bool> row;
        for (std::size_t c = 0; c < line.size(); ++c) {
            const char ch = line[c];
            if (ch == ' ' || ch == '\t') continue;
            PLAB_CHECK(ch == '0' || ch == '1', "mask file " << path << " line " << line_no
                                                            << " column " << c + 1 << ": '" << ch
                                                            << "' is not 0 or 1");
            row.push_back(ch == '1');
        }
        PLAB_CHECK(static_cast<int>(row.size()) == n_tokens,
                   "mask file " << path << " line " << line_no << " has " << row.size()
                                << " values; the prompt has " << n_tokens
                                << " tokens, so every row needs " << n_tokens);
        rows.push_back(std::move(row));
    }
    PLAB_CHECK(static_cast<int>(rows.size()) == n_tokens,
               "mask file " << path << " has " << rows.size() << " rows; the prompt has "
                            << n_tokens << " tokens, so the mask needs " << n_tokens << " rows of "
                            << n_tokens << " values");
    for (int q = 0; q < n_tokens; ++q) {
        const bool any = std::find(rows[q].begin(), rows[q].end(), true) != rows[q].end();
        PLAB_CHECK(any, "mask file " << path << " row " << q
                                     << " sees no key: a softmax over nothing is undefined; give "
                                        "every row at least one 1 (e.g. its diagonal)");
    }
    return rows;
}

BoundMask bind_mask(const MaskSpec& spec, const MaskContext& ctx) {
    const int t = static_cast<int>(ctx.tokens.size());
    PLAB_ASSERT(t >= 1);
    Mask mask;
    std::vector<uint32_t> words;
    mask.n_terms = static_cast<int32_t>(spec.items.size());
    // A single "causal" item is the default mask itself.
    if (spec.items.size() == 1 && spec.items[0].kind == MaskKind::causal) mask.n_terms = 0;
    for (int i = 0; i < mask.n_terms; ++i) {
        const MaskItem& it = spec.items[static_cast<std::size_t>(i)];
        MaskTerm& term = mask.terms[i];
        term.kind = it.kind;
        term.a = it.a;
        term.b = it.b;
        term.new_group = it.new_group ? 1 : 0;
        term.offset = static_cast<int32_t>(words.size());
        switch (it.kind) {
            case MaskKind::prefix:
                PLAB_CHECK(it.a <= t, "mask item '" << it.text << "': the prefix of " << it.a
                                                    << " tokens is longer than the prompt of " << t
                                                    << "; P must be 1.." << t);
                break;
            case MaskKind::docs: {
                std::vector<uint32_t> starts{0};
                if (it.split_at_bos) {
                    PLAB_CHECK(ctx.bos_id >= 0,
                               "mask item 'docs:bos' needs a tokenizer with a "
                               "BOS token; give the lengths, e.g. docs:5,7,3");
                    for (int p = 1; p < t; ++p) {
                        if (ctx.tokens[static_cast<std::size_t>(p)] == ctx.bos_id)
                            starts.push_back(static_cast<uint32_t>(p));
                    }
                } else {
                    long long sum = 0;
                    for (int len : it.lengths) sum += len;
                    PLAB_CHECK(sum == t, "mask item '" << it.text << "': the document lengths sum "
                                                       << "to " << sum << " but the prompt has "
                                                       << t << " tokens; they must sum to " << t);
                    int at = 0;
                    for (std::size_t d = 0; d + 1 < it.lengths.size(); ++d) {
                        at += it.lengths[d];
                        starts.push_back(static_cast<uint32_t>(at));
                    }
                }
                term.a = static_cast<int32_t>(starts.size());
                words.insert(words.end(), starts.begin(), starts.end());
                break;
            }
            case MaskKind::custom: {
                const auto rows = read_custom_mask(it.path, t);
                const int per_row = (t + 31) / 32;
                term.a = t;
                const std::size_t base = words.size();
                words.resize(base + std::size_t(t) * per_row, 0u);
                for (int q = 0; q < t; ++q) {
                    for (int k = 0; k < t; ++k) {
                        if (rows[q][k])
                            words[base + std::size_t(q) * per_row + k / 32] |= 1u << (k % 32);
                    }
                }
                mask.limit = mask.limit == 0 ? t : std::min(mask.limit, t);
                break;
            }
            default:
                break;
        }
    }
    if (spec.alibi) {
        PLAB_CHECK(ctx.n_heads >= 1, "alibi needs the model's number of heads");
        mask.alibi = 1;
        mask.n_heads = ctx.n_heads;
        mask.alibi_offset = static_cast<int32_t>(words.size());
        for (double slope : alibi_slopes(ctx.n_heads)) {
            const float f = static_cast<float>(slope);
            uint32_t bits = 0;
            std::memcpy(&bits, &f, sizeof bits);
            words.push_back(bits);
        }
    }
    mask.softcap = spec.softcap;
    BoundMask bound(spec.text, mask, std::move(words));
    // An OR/AND combination could leave a query with nothing to see (an empty
    // softmax); only a custom file can, but check the whole mask once.
    const Mask m = bound.view();
    for (int q = 0; q < t; ++q) {
        const KeyRange r = m.key_range(q);
        bool any = false;
        for (int k = std::max(r.lo, 0); k <= std::min(r.hi, t - 1) && !any; ++k)
            any = m.visible(q, k);
        PLAB_CHECK(any, "mask '" << spec.text << "' leaves the query at position " << q
                                 << " no key to see (an empty softmax); every query needs at "
                                    "least one visible key");
    }
    return bound;
}

BoundMask make_mask_one_head(std::string_view spec, int n_positions) {
    const std::vector<int32_t> ids(static_cast<std::size_t>(std::max(0, n_positions)), 0);
    MaskContext mc;
    mc.tokens = ids;
    mc.n_heads = 1;
    return make_mask(spec, mc);
}

BoundMask make_mask(std::string_view spec, const MaskContext& context) {
    return bind_mask(parse_mask_spec(spec), context);
}

ChunkPlan nearest_valid_plan(const Mask& mask, const ChunkPlan& plan, int start_pos) {
    ChunkPlan out;
    const int end_all = start_pos + plan.n_tokens();
    int c0 = start_pos, nominal = start_pos;
    std::size_t ci = 0;
    while (c0 < end_all) {
        // The chunk at least as long as the next planned one, then grown until
        // every query in it finds its keys inside it.
        while (nominal <= c0 && ci < plan.lengths.size()) nominal += plan.lengths[ci++];
        int end = std::max(nominal, c0 + 1);
        for (int q = c0; q < end; ++q)
            end = std::max(end, std::min(mask.key_range(q).hi + 1, end_all));
        out.lengths.push_back(end - c0);
        c0 = end;
    }
    return out;
}

void check_plan_for_mask(const Mask& mask, const ChunkPlan& plan, int start_pos) {
    int c0 = start_pos;
    for (int len : plan.lengths) {
        const int c1 = c0 + len;  // the chunk's keys end at c1 - 1
        for (int q = c0; q < c1; ++q) {
            const int hi = mask.key_range(q).hi;
            if (hi < c1) continue;
            const ChunkPlan good = nearest_valid_plan(mask, plan, start_pos);
            int prefix = 0;
            for (int i = 0; i < mask.n_terms; ++i) {
                if (mask.terms[i].kind == MaskKind::prefix) prefix = mask.terms[i].a;
            }
            if (prefix > 0 && q < prefix) {
                PLAB_CHECK(false, "chunk plan " << plan.to_string() << " splits the bidirectional "
                                                << "prefix (positions 0.." << prefix - 1
                                                << ") at position " << c1
                                                << ": prefix queries there would need keys not "
                                                   "computed yet, so chunked would differ from "
                                                   "full; the prefix must lie in one chunk, e.g. "
                                                   "plan "
                                                << good.to_string());
            }
            PLAB_CHECK(false, "chunk plan " << plan.to_string() << " ends a chunk at position "
                                            << c1 - 1 << " but the query at position " << q
                                            << " may see key " << hi
                                            << " (not computed yet), so chunked would differ "
                                               "from full; a query's keys must lie in its chunk or "
                                               "before, e.g. plan "
                                            << good.to_string());
        }
        c0 = c1;
    }
}

long long count_visible_pairs(const Mask& mask, int n_tokens) {
    long long n = 0;
    for (int q = 0; q < n_tokens; ++q) {
        const KeyRange r = mask.key_range(q);
        for (int k = std::max(0, r.lo); k <= std::min(r.hi, n_tokens - 1); ++k)
            n += mask.visible(q, k) ? 1 : 0;
    }
    return n;
}

std::vector<TileClass> tile_map(const Mask& mask, int n_tokens, int tile) {
    PLAB_CHECK(tile >= 1, "tile size " << tile << " must be at least 1");
    const int tiles = (n_tokens + tile - 1) / tile;
    std::vector<TileClass> out;
    for (int qt = 0; qt < tiles; ++qt) {
        for (int kt = 0; kt < tiles; ++kt) {
            out.push_back(mask.classify_tile(qt * tile, std::min(n_tokens, qt * tile + tile) - 1,
                                             kt * tile, std::min(n_tokens, kt * tile + tile) - 1));
        }
    }
    return out;
}

}  // namespace plab
