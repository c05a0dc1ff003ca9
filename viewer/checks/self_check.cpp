// Self-checks of each scene's engine answer (see self_check.h).
//
// Each check compares what the engine returned (outputs, session length, block
// tables, trace events) with a fact known without the engine: the toy's means
// worked out by hand, the positions a chunk plan implies, where a block size
// puts a position. None of them recomputes model math.
#include "checks/self_check.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <set>

#include "checks/known_mean.h"
#include "core/kv_layout.h"
#include "core/mask.h"

namespace plab::viewer {
namespace {

const char* yes_no(bool ok) {
    return ok ? "yes" : "no";
}

// Keeps the first reason a check failed, for its line.
struct Failure {
    std::string why;
    void add(const std::string& s) {
        if (why.empty()) why = s;
    }
    std::string suffix() const { return why.empty() ? "" : "; first failure: " + why; }
};

// 1. Toy ----------------------------------------------------------------------------

// The toy's known answer at position p (checks/known_mean.h): when every visible
// score q_p*k_j (j <= p) is the same, each visible key has weight 1/(p+1).
KnownMean known_output(const ToyInput& in, int p) {
    KnownMean k;
    for (int j = 0; j <= p; ++j) {
        if (in.queries[p] * in.keys[j] != in.queries[p] * in.keys[0]) return {};
        if (in.values[j] != std::floor(in.values[j])) return {};
        k.sum += static_cast<long long>(in.values[j]);
    }
    if (std::llabs(k.sum) >= (1LL << 24)) return {};
    k.known = true;
    k.count = p + 1;
    return k;
}

bool same_bits(float a, float b) {
    return std::memcmp(&a, &b, sizeof a) == 0;
}

// Fast backends may take exp(0) from another exp and add in another order: the
// p+1 products and sums, the exp and the division each round once, at most
// 2^-24 relative each, so the output is within (p+3)·2^-24·max|v_j| of the mean,
// and a visible probability within (p+3)·2^-24 of 1/(p+1).
double fast_tolerance(int p, double scale) {
    return (p + 3) * std::ldexp(1.0, -24) * scale;
}

}  // namespace

CheckResult check_toy(const ToySnapshot& toy) {
    const ToyInput& in = toy.input;
    const int t = in.n_tokens();
    Failure f;
    bool ok = static_cast<int>(toy.full.outputs.size()) == t &&
              static_cast<int>(toy.chunked.outputs.size()) == t &&
              toy.full.probs.size() == static_cast<std::size_t>(t) * t &&
              toy.chunked.probs.size() == static_cast<std::size_t>(t) * t;
    if (!ok)
        f.add("the engine returned " + std::to_string(toy.full.outputs.size()) + " outputs for " +
              std::to_string(t) + " positions");
    std::string known_list;
    int n_known = 0;
    double worst = 0;  // fast backends: largest |output - known| / max|v|
    for (const ToyRun* run : {&toy.full, &toy.chunked}) {
        for (int p = 0; ok && p < t; ++p) {
            const KnownMean k = known_output(in, p);
            double scale = 0;
            for (int j = 0; j <= p; ++j) scale = std::max(scale, double(std::fabs(in.values[j])));
            const std::string where =
                "plan " + run->plan.to_string() + ", position " + std::to_string(p);
            for (int j = 0; j < t; ++j) {
                const float prob = run->probs[static_cast<std::size_t>(p) * t + j];
                // The causal mask: a future key gets exactly 0 on every backend.
                if (!Mask{}.visible(p, j) && prob != 0.0f)
                    f.add(where + ": future key " + std::to_string(j) + " has probability " +
                          std::to_string(prob));
                if (!Mask{}.visible(p, j) || !k.known) continue;
                const float want = 1.0f / static_cast<float>(p + 1);
                if (toy.reference ? !same_bits(prob, want)
                                  : std::fabs(double(prob) - want) > fast_tolerance(p, 1.0))
                    f.add(where + ": key " + std::to_string(j) + " has probability " +
                          std::to_string(prob) + ", not 1/" + std::to_string(p + 1));
            }
            if (!k.known) continue;
            if (run == &toy.full) {
                known_list += (known_list.empty() ? "" : ", ") + k.text();
                ++n_known;
            }
            const float got = run->outputs[p];
            if (toy.reference) {
                // One fixed order, exp(0) == 1 exactly: the bits of float(sum) / (p+1).
                if (!same_bits(got, k.value()))
                    f.add(where + ": output " + std::to_string(got) + ", expected " + k.text());
            } else {
                const double err = std::fabs(double(got) - k.value());
                if (scale > 0) worst = std::max(worst, err / scale);
                if (!(err <= fast_tolerance(p, scale)))
                    f.add(where + ": output " + std::to_string(got) + ", expected " + k.text() +
                          " within " + std::to_string(fast_tolerance(p, scale)));
            }
        }
    }
    // Chunked == full, to the bit, is the reference backends' promise.
    if (toy.reference && !toy.all_bitwise) f.add("chunked output differs from full in some bit");
    ok = ok && f.why.empty();
    CheckResult r;
    r.ok = ok;
    char fast[120] = "";
    if (!toy.reference)
        std::snprintf(fast, sizeof fast,
                      " within (p+3)*2^-24*max|v| (fast backend; worst %.1e of max|v|)", worst);
    r.line = std::string("toy: outputs equal the means known by hand (") +
             (n_known > 0 ? known_list : "none known") + ")" + (toy.reference ? " bitwise" : fast) +
             ", future probabilities 0, chunked == full bitwise: " + yes_no(toy.all_bitwise) +
             "; all kept: " + yes_no(ok) + " (" + std::to_string(n_known) + " of " +
             std::to_string(t) + " positions known, plan " + toy.chunked.plan.to_string() +
             ", backend " + toy.backend + ")" + f.suffix();
    return r;
}

// 2. The mask scene: self_check_mask.cpp.

// 3. KV cache -----------------------------------------------------------------------
namespace {

bool parse_int(std::string_view s, int& out) {
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size();
}

// "3,7" -> {3, 7}; with ranges = true, "8-11,24-25" -> {8, 9, 10, 11, 24, 25}.
bool parse_list(const std::string& text, bool ranges, std::vector<int>& out) {
    out.clear();
    std::size_t start = 0;
    while (start <= text.size()) {
        std::size_t comma = text.find(',', start);
        if (comma == std::string::npos) comma = text.size();
        const std::string_view item(text.data() + start, comma - start);
        const std::size_t dash = ranges ? item.find('-') : std::string_view::npos;
        int a = 0, b = 0;
        if (dash == std::string_view::npos) {
            if (!parse_int(item, a)) return false;
            b = a;
        } else if (!parse_int(item.substr(0, dash), a) || !parse_int(item.substr(dash + 1), b) ||
                   b < a) {
            return false;
        }
        for (int x = a; x <= b; ++x) out.push_back(x);
        start = comma + 1;
    }
    return true;
}

std::string arg(const TraceEvent& e, const char* key) {
    const auto it = e.args.find(key);
    return it == e.args.end() ? std::string() : it->second;
}

// What check_kv carries from one engine call to the next.
struct KvWalk {
    const KvSnapshot& kv;
    int b = 0;  // the block size B
    Mask mask;  // the session's mask: the blocks it forgets are given back
    Failure f{};
    std::vector<int32_t> previous_table{};
    std::set<int> live_slots{};  // slots holding a position's K/V (freed blocks' slots leave)
    int end = 0;                 // positions the plan and the decode steps so far imply
    int boundaries = 0, inside = 0, n_decode = 0, most_held = 0, total_freed = 0;
    int n_verify = 0, guesses = 0, accepted = 0, rolled_back_blocks = 0;
    std::vector<int32_t> made{};  // with speculation: the tokens the verify steps made
};

// One engine call, as the failures name it.
struct KvCall {
    const KvStage& s;
    std::string name;     // "prefill chunk 2", "decode step 1"
    int first = 0;        // the first position it must write; KvWalk::end is one past its last kept
    int written_end = 0;  // one past its last written (a verify step's rejected guesses too)
};

// 1. What call i must write: the next chunk of the plan, or one position. False when
//    the engine made more prefill calls than the plan has chunks.
bool kv_walk_positions(KvWalk& w, std::size_t i, KvCall& c) {
    const std::vector<int>& plan = w.kv.plan.lengths;
    const KvStage& s = c.s;
    if (!s.decode && i >= plan.size()) {
        w.f.add(c.name + ": more prefill calls than the plan's " + std::to_string(plan.size()) +
                " chunks");
        return false;
    }
    if (s.decode && i < plan.size()) w.f.add(c.name + " before the plan's chunks were all run");
    // A verify step keeps the fed token and the guesses it accepted.
    const int n = s.verify ? 1 + s.accepted : s.decode ? 1 : plan[i];
    c.first = w.end;
    w.end += n;
    c.written_end = s.verify ? c.first + s.n_pos : w.end;
    w.n_decode += s.decode ? 1 : 0;
    if (!s.decode && i > 0) {
        ++w.boundaries;
        if (c.first % w.b != 0) ++w.inside;
    }
    return true;
}

// 2. The session's length, read from the engine after the call, and its block table.
//    Returns the table's freed entries.
int kv_check_table(KvWalk& w, const KvCall& c) {
    const KvStage& s = c.s;
    const int b = w.b, end = w.end;
    const std::string& call = c.name;
    Failure& f = w.f;
    if (s.length != end)
        f.add(call + ": the session holds " + std::to_string(s.length) +
              " positions, the plan implies " + std::to_string(end));
    // Whole blocks: ceil(length/B) table entries; an entry never changes except
    // to kFreedBlock (a chunk starting inside a block fills that same block).
    const std::size_t want_blocks = static_cast<std::size_t>((end + b - 1) / b);
    if (s.block_table.size() != want_blocks)
        f.add(call + ": block table of " + std::to_string(s.block_table.size()) + " blocks, ceil(" +
              std::to_string(end) + "/" + std::to_string(b) + ") = " + std::to_string(want_blocks));
    if (s.block_table.size() < w.previous_table.size()) f.add(call + ": the block table shrank");
    for (std::size_t lb = 0; lb < w.previous_table.size() && f.why.empty(); ++lb)
        if (s.block_table[lb] != w.previous_table[lb] && s.block_table[lb] != kFreedBlock)
            f.add(call + ": an earlier block table entry changed");
    // Freed entries are exactly the full blocks the mask forgets: no query at
    // position `end` or later may see any of their positions.
    int freed = 0;
    for (std::size_t lb = 0; lb < s.block_table.size() && f.why.empty(); ++lb) {
        const int p0 = static_cast<int>(lb) * b;
        bool forgotten = p0 + b <= end;
        for (int p = p0; p < p0 + b && forgotten; ++p) forgotten = w.mask.forgets(p, end);
        const bool is_freed = s.block_table[lb] == kFreedBlock;
        freed += is_freed ? 1 : 0;
        if (is_freed != forgotten)
            f.add(call + ": logical block " + std::to_string(lb) +
                  (is_freed
                       ? " was given back but a later query may see it"
                       : " is kept but no later query can see it (mask " + w.kv.mask.spec() + ")"));
    }
    if (freed != s.freed_blocks) f.add(call + ": freed-block count disagrees with the table");
    if (s.blocks_in_use != static_cast<int>(s.block_table.size()) - freed)
        f.add(call + ": " + std::to_string(s.blocks_in_use) + " blocks in use for a table of " +
              std::to_string(s.block_table.size()) + " entries, " + std::to_string(freed) +
              " of them freed");
    if (s.bytes_in_use != static_cast<std::size_t>(s.blocks_in_use) * b * w.kv.bytes_per_token)
        f.add(call + ": bytes in use are not whole blocks");
    if (s.peak_blocks < s.blocks_in_use) f.add(call + ": held fewer blocks than it kept");
    return freed;
}

// The table the call wrote through. A block written and freed by this same call is
// known only from the event (layer 0's), so it is the previous table plus it.
std::vector<int32_t> kv_table_during_call(const KvWalk& w, const KvCall& c) {
    std::vector<int> event_blocks;
    parse_list(arg(c.s.appends[0], "blocks"), false, event_blocks);
    // A verify step wrote through its table before the roll-back.
    std::vector<int32_t> written = c.s.verify ? c.s.table_verified : c.s.block_table;
    for (std::size_t lb = 0; lb < written.size(); ++lb) {
        if (written[lb] != kFreedBlock) continue;
        const int j = static_cast<int>(lb) - c.first / w.b;  // index in the call's blocks
        if (lb < w.previous_table.size() && w.previous_table[lb] != kFreedBlock)
            written[lb] = w.previous_table[lb];  // held before, freed after this call
        else if (lb >= w.previous_table.size() && j >= 0 &&
                 j < static_cast<int>(event_blocks.size()))
            written[lb] = event_blocks[static_cast<std::size_t>(j)];  // written and freed now
    }
    return written;
}

// 3. The engine's "kv append" events: one per layer, in layer order, naming the
//    positions the plan implies and the slots the block table gives them. Returns
//    those slots (block_table[p/B]*B + p%B).
std::vector<int> kv_check_appends(KvWalk& w, const KvCall& c, const std::vector<int32_t>& written) {
    const int b = w.b, first = c.first, end = c.written_end;
    const std::string& call = c.name;
    Failure& f = w.f;
    std::vector<int> want_slots, want_blocks_list;
    for (int p = first; p < end; ++p) want_slots.push_back(kv_slot(written.data(), p, b));
    for (int lb = first / b; lb <= (end - 1) / b; ++lb)
        want_blocks_list.push_back(written[static_cast<std::size_t>(lb)]);
    const std::string want_pos = std::to_string(first) + "-" + std::to_string(end - 1);
    for (std::size_t l = 0; l < c.s.appends.size() && f.why.empty(); ++l) {
        const TraceEvent& e = c.s.appends[l];
        std::vector<int> slots, blocks;
        if (arg(e, "layer") != std::to_string(l))
            f.add(call + ": event " + std::to_string(l) + " is for layer '" + arg(e, "layer") +
                  "'");
        if (arg(e, "positions") != want_pos)
            f.add(call + ", layer " + std::to_string(l) + ": positions " + arg(e, "positions") +
                  ", the plan implies " + want_pos);
        if (!parse_list(arg(e, "slots"), true, slots) || slots != want_slots)
            f.add(call + ", layer " + std::to_string(l) + ": slots '" + arg(e, "slots") +
                  "' are not block_table[p/B]*B + p%B");
        if (!parse_list(arg(e, "blocks"), false, blocks) || blocks != want_blocks_list)
            f.add(call + ", layer " + std::to_string(l) + ": blocks '" + arg(e, "blocks") +
                  "' are not the table's entries for these positions");
    }
    return want_slots;
}

// 4. No position overwrites a slot still holding another's K/V; a freed
//    block's slots may be written again.
void kv_track_live_slots(KvWalk& w, const KvCall& c, const std::vector<int32_t>& written,
                         const std::vector<int>& slots) {
    for (int slot : slots)
        if (!w.live_slots.insert(slot).second)
            w.f.add(c.name + ": slot " + std::to_string(slot) + " written twice while live");
    for (std::size_t lb = 0; lb < c.s.block_table.size(); ++lb)
        if (c.s.block_table[lb] == kFreedBlock && written[lb] != kFreedBlock)
            for (int o = 0; o < w.b; ++o) w.live_slots.erase(written[lb] * w.b + o);
    // A verify step's rejected guesses were rolled back: their slots hold nothing.
    for (int p = w.end; p < c.written_end; ++p) w.live_slots.erase(kv_slot(written.data(), p, w.b));
}

// 4b. A verify step (speculative decoding): its chunk is the fed token and its
//     guesses, the accepted ones a prefix of what it emitted, one token from the
//     target after them; the table before the roll-back held the whole chunk,
//     the one after it is its prefix (a window mask may then free entries).
void kv_check_verify(KvWalk& w, const KvCall& c) {
    const KvStage& s = c.s;
    Failure& f = w.f;
    const std::string& call = c.name;
    const int guesses = static_cast<int>(s.chunk.size()) - 1;
    if (s.n_pos != static_cast<int>(s.chunk.size()) || guesses < 0)
        f.add(call + ": wrote " + std::to_string(s.n_pos) + " positions for a chunk of " +
              std::to_string(s.chunk.size()));
    if (s.accepted < 0 || s.accepted > guesses ||
        static_cast<int>(s.emitted.size()) != s.accepted + 1)
        f.add(call + ": " + std::to_string(s.accepted) + " of " + std::to_string(guesses) +
              " guesses accepted and " + std::to_string(s.emitted.size()) +
              " tokens emitted (accepted + the target's one)");
    for (int a = 0; a < s.accepted && f.why.empty(); ++a)
        if (s.emitted[static_cast<std::size_t>(a)] != s.chunk[static_cast<std::size_t>(a + 1)])
            f.add(call + ": accepted guess " + std::to_string(a + 1) + " is not the token emitted");
    const std::size_t want = static_cast<std::size_t>((c.written_end + w.b - 1) / w.b);
    if (s.table_verified.size() != want)
        f.add(call + ": the table before the roll-back has " +
              std::to_string(s.table_verified.size()) + " blocks, the chunk needs " +
              std::to_string(want));
    for (std::size_t lb = 0; lb < s.block_table.size() && f.why.empty(); ++lb)
        if (lb >= s.table_verified.size() ||
            (s.block_table[lb] != s.table_verified[lb] && s.block_table[lb] != kFreedBlock))
            f.add(call + ": the roll-back changed logical block " + std::to_string(lb));
    if (s.blocks_verified < s.blocks_in_use)
        f.add(call + ": held fewer blocks while verifying than after the roll-back");
    if (w.made.empty() && !s.chunk.empty()) w.made.push_back(s.chunk[0]);
    w.made.insert(w.made.end(), s.emitted.begin(), s.emitted.end());
    ++w.n_verify;
    w.guesses += guesses;
    w.accepted += s.accepted;
    w.rolled_back_blocks += s.blocks_verified - s.blocks_in_use;
}

// The kv line: what was checked, on which plan, and the first failure.
CheckResult kv_result(const KvWalk& w) {
    const KvSnapshot& kv = w.kv;
    CheckResult r;
    r.ok = w.f.why.empty();
    r.line = std::string(
                 "kv: session length, block tables and 'kv append' positions and slots match "
                 "the plan and B after every call: ") +
             yes_no(r.ok) + " (" + std::to_string(kv.n_prompt) + " prompt tokens, plan " +
             kv.plan.to_string() + ", B=" + std::to_string(w.b) + ", " + std::to_string(w.inside) +
             " of " + std::to_string(w.boundaries) + " chunk boundaries inside a block, " +
             std::to_string(w.n_decode) + " decode steps)";
    if (!kv.mask.is_causal())
        r.line += "; mask " + kv.mask.spec() +
                  ": the blocks it forgets are given back: " + yes_no(r.ok) + " (" +
                  std::to_string(w.total_freed) + " freed, at most " + std::to_string(w.most_held) +
                  " held)";
    if (kv.speculate > 0)
        r.line += "; speculative decoding (draft " + kv.draft + ", up to " +
                  std::to_string(kv.speculate) + " guesses): " + std::to_string(w.n_verify) +
                  " verify steps, " + std::to_string(w.accepted) + " of " +
                  std::to_string(w.guesses) + " guesses accepted, " +
                  std::to_string(w.rolled_back_blocks) +
                  " blocks rolled back, plain greedy decoding's tokens: " + yes_no(r.ok);
    if (!kv.refusal.empty())
        r.line += "; plan refused: " + kv.refusal + "; ran plan " + kv.plan.to_string();
    r.line += w.f.suffix();
    return r;
}

}  // namespace

CheckResult check_kv(const KvSnapshot& kv) {
    KvWalk w{kv, kv.block_size, kv.mask.view()};
    if (kv.stages.empty() || w.b <= 0) w.f.add("no engine calls recorded");
    for (std::size_t i = 0; i < kv.stages.size() && w.f.why.empty(); ++i) {
        const KvStage& s = kv.stages[i];
        KvCall c{s, (s.decode ? "decode step " : "prefill chunk ") +
                        std::to_string(s.decode ? w.n_decode + 1 : static_cast<int>(i))};
        if (!kv_walk_positions(w, i, c)) break;
        const int freed = kv_check_table(w, c);
        if (!w.f.why.empty()) break;
        if (static_cast<int>(s.appends.size()) != kv.n_layers || s.appends.empty()) {
            w.f.add(c.name + ": " + std::to_string(s.appends.size()) + " 'kv append' events for " +
                    std::to_string(kv.n_layers) + " layers");
            break;
        }
        if (s.verify) kv_check_verify(w, c);
        if (!w.f.why.empty()) break;
        const std::vector<int32_t> written = kv_table_during_call(w, c);
        const std::vector<int> slots = kv_check_appends(w, c, written);
        kv_track_live_slots(w, c, written, slots);
        w.most_held = std::max(w.most_held, s.peak_blocks);
        w.total_freed = freed;
        w.previous_table = s.block_table;
    }
    if (w.f.why.empty() && kv.stages.size() < kv.plan.lengths.size())
        w.f.add(std::to_string(kv.stages.size()) + " engine calls for a plan of " +
                std::to_string(kv.plan.lengths.size()) + " chunks");
    // Speculation: greedy verify steps make greedy decoding's tokens.
    if (w.f.why.empty() && kv.speculate > 0 && w.made != kv.plain_tokens)
        w.f.add("the verify steps made other tokens than plain greedy decoding (" +
                std::to_string(w.made.size()) + " tokens)");
    return kv_result(w);
}

// 3b. The shared pool ------------------------------------------------------------------
CheckResult check_serving(const ServingSnapshot& sv) {
    Failure f;
    const int b = sv.block_size;
    if (sv.stages.size() < 2 || b <= 0) f.add("no engine steps recorded");
    int max_ref = 0;
    long long preempted = 0, evictions = 0;
    for (std::size_t k = 0; k < sv.stages.size() && f.why.empty(); ++k) {
        const ServingStage& st = sv.stages[k];
        // Steps counted from 1, as the viewer's step counter and pool caption count them.
        const std::string at = k == 0 ? "before step 1" : "after step " + std::to_string(k);
        if (static_cast<int>(st.blocks.size()) != sv.num_blocks) {
            f.add(at + ": " + std::to_string(st.blocks.size()) + " blocks for a pool of " +
                  std::to_string(sv.num_blocks));
            break;
        }
        // 1. Every reference is a block-table entry: the engine's ref count of a
        //    block equals the tables that hold it (a leaked or a missing
        //    reference would differ), and each table holds ceil(length/B) blocks.
        std::vector<int> entries(st.blocks.size(), 0);
        for (std::size_t id = 0; id < st.requests.size(); ++id) {
            const ServingRequestState& r = st.requests[id];
            if (r.block_table.size() != static_cast<std::size_t>((r.length + b - 1) / b))
                f.add(at + ": request " + std::to_string(id) + " holds " +
                      std::to_string(r.length) + " positions in " +
                      std::to_string(r.block_table.size()) + " blocks");
            for (int32_t blk : r.block_table)
                if (blk >= 0 && blk < sv.num_blocks) ++entries[static_cast<std::size_t>(blk)];
        }
        int in_use = 0, cached = 0, evicted = 0;
        for (std::size_t i = 0; i < st.blocks.size(); ++i) {
            const PoolBlock& blk = st.blocks[i];
            const std::string name = at + ", block " + std::to_string(i);
            max_ref = std::max(max_ref, blk.ref_count);
            if (blk.ref_count != entries[i] || blk.ref_count != static_cast<int>(blk.owners.size()))
                f.add(name + ": reference count " + std::to_string(blk.ref_count) + ", " +
                      std::to_string(entries[i]) + " block-table entries");
            // 2. Only a full, named prefix block is shared, and it sits at the
            //    same logical place in every table that shares it.
            if (blk.owners.size() > 1 &&
                (!blk.named || std::adjacent_find(blk.logical.begin(), blk.logical.end(),
                                                  std::not_equal_to<>()) != blk.logical.end()))
                f.add(name + ": shared but not a named block at one logical position");
            in_use += blk.state == PoolBlockState::kInUse ? 1 : 0;
            cached += blk.state == PoolBlockState::kCachedFree ? 1 : 0;
            evicted += blk.evicted ? 1 : 0;
        }
        // 3. The picture's counts are the pool's own counters.
        if (in_use != st.pool.blocks_in_use || cached != st.pool.cached_free_blocks ||
            sv.num_blocks - in_use != st.pool.free_blocks)
            f.add(at + ": " + std::to_string(in_use) + " blocks in use and " +
                  std::to_string(cached) + " cached free, the pool counts " +
                  std::to_string(st.pool.blocks_in_use) + " and " +
                  std::to_string(st.pool.cached_free_blocks));
        if (evicted != st.evictions)
            f.add(at + ": " + std::to_string(evicted) +
                  " named blocks written again, the pool counted " + std::to_string(st.evictions) +
                  " evictions");
        // 4. A preempted request has given all its blocks back and waits.
        for (int id : st.record.preempted) {
            const ServingRequestState& r = st.requests.at(static_cast<std::size_t>(id));
            if (!r.block_table.empty() || r.state != RequestState::waiting)
                f.add(at + ": request " + std::to_string(id) +
                      " preempted but still runs or holds blocks");
        }
        preempted += static_cast<long long>(st.record.preempted.size());
        evictions += st.evictions;
    }
    // 5. When every request has finished, no block is in use (none leaked).
    if (f.why.empty()) {
        const ServingStage& last = sv.stages.back();
        for (std::size_t id = 0; id < last.requests.size(); ++id)
            if (last.requests[id].state != RequestState::finished)
                f.add("request " + std::to_string(id) + " never finished");
        if (last.pool.blocks_in_use != 0)
            f.add(std::to_string(last.pool.blocks_in_use) + " blocks in use after the last step");
        if (preempted != last.pool.preemptions)
            f.add("steps preempted " + std::to_string(preempted) + " times, the engine counted " +
                  std::to_string(last.pool.preemptions));
    }
    CheckResult r;
    r.ok = f.why.empty();
    const PoolStats last = sv.stages.empty() ? PoolStats{} : sv.stages.back().pool;
    r.line = std::string(
                 "serving: reference counts equal block-table entries, shared blocks are named "
                 "prefix blocks, pool counts and evictions add up after every step, no block "
                 "in use at the end: ") +
             yes_no(r.ok) + " (" + std::to_string(sv.requests.size()) + " requests, " +
             std::to_string(std::max(0, sv.n_steps())) + " steps, " +
             std::to_string(sv.num_blocks) + " blocks of B=" + std::to_string(b) +
             ", prefix cache " + (sv.prefix_cache ? "on" : "off") + ", largest reference count " +
             std::to_string(max_ref) + ", " + std::to_string(last.hit_blocks) +
             " prefix-hit blocks, " + std::to_string(preempted) + " preemptions, " +
             std::to_string(evictions) + " evictions)" + f.suffix();
    return r;
}

// 4. Equivalence --------------------------------------------------------------------

// The fast backends' promise (plab compare, lessons/04): last-position logits
// within 1e-5 of cpu-ref's max |logit|, and the same greedy token unless
// cpu-ref's top two logits are within twice that of each other (a near tie that
// a difference within the promise may flip).
constexpr double kFastLogitsRelative = 1e-5;

CheckResult check_equivalence(const EquivalenceSnapshot& eq) {
    Failure f;
    if (eq.cells.empty()) f.add("no cells");
    const double allowed = kFastLogitsRelative * eq.logit_scale;
    const bool near_tie = eq.logit_top2_gap <= 2 * allowed;
    double worst = 0;  // fast rows: largest logits |diff| / max |logit|
    for (std::size_t row = 0; row < eq.backends.size(); ++row)
        for (std::size_t col = 0; col < eq.plans.size(); ++col) {
            const std::size_t i = row * eq.plans.size() + col;
            const std::string cell = eq.backends[row] + " plan " + eq.plans[col];
            if (!eq.errors[i].empty()) {
                f.add(cell + ": " + eq.errors[i]);
                continue;
            }
            const Difference& d = eq.cells[i];
            // A cell bitwise equal to cpu-ref's whole prefill shows cpu-ref's digest.
            if (i >= eq.digests.size() || eq.digests[i].size() != 8)
                f.add(cell + ": no logits digest");
            else if (d.bitwise() && eq.digests[i] != eq.reference_digest)
                f.add(cell + ": bitwise but another digest");
            if (eq.reference[row]) {
                if (!d.bitwise()) f.add(cell + ": not bitwise");
                continue;
            }
            if (eq.logit_scale > 0) worst = std::max(worst, d.logits_max_abs / eq.logit_scale);
            if (!(d.logits_max_abs <= allowed))
                f.add(cell + ": logits differ by " + std::to_string(d.logits_max_abs) +
                      ", more than 1e-5 of max |logit| " + std::to_string(eq.logit_scale));
            if (!d.same_argmax && !near_tie) f.add(cell + ": another greedy token");
        }
    CheckResult r;
    r.ok = f.why.empty();
    char line[400];
    std::snprintf(line, sizeof line,
                  "equivalence: reference rows bitwise, fast rows within 1e-5 of max |logit| "
                  "with the same greedy token: %s (%zu backends x %zu plans, worst fast row "
                  "%.1e of max |logit|%s)",
                  yes_no(r.ok), eq.backends.size(), eq.plans.size(), worst,
                  near_tie ? ", top two logits near-tied: token may differ" : "");
    r.line = line + f.suffix();
    return r;
}

// 5. Timeline -----------------------------------------------------------------------
CheckResult check_timeline(const TimelineSnapshot& tl) {
    const bool has_spans = std::any_of(tl.events.begin(), tl.events.end(),
                                       [](const TraceEvent& e) { return e.name == "prefill"; }) &&
                           std::any_of(tl.events.begin(), tl.events.end(),
                                       [](const TraceEvent& e) { return e.name == "request"; });
    const bool ok = has_spans && tl.prefill_us > 0 && tl.ttft_us > tl.prefill_us;
    char line[200];
    std::snprintf(line, sizeof line,
                  "timeline: TTFT (%.0f us) >= prefill (%.0f us), different spans: %s", tl.ttft_us,
                  tl.prefill_us, yes_no(ok));
    std::string out = line;
    if (tl.mask != "causal") out += " (mask " + tl.mask + ")";
    if (!tl.refusal.empty()) out += "; plan refused: " + tl.refusal + "; ran plan " + tl.plan;
    return CheckResult{ok, out};
}

}  // namespace plab::viewer
