#include "toy/flash_head.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "core/attention_math.h"
#include "core/attention_reference.h"
#include "core/attention_shape.h"
#include "core/error.h"
#include "core/flash_trace.h"
#include "core/kv_layout.h"
#include "runtime/loaded_model.h"
#include "runtime/session.h"
#include "toy/rounding.h"

namespace plab {
namespace {

// What the gpu run hands back for one head: its rows of Q and of the output,
// its KV head's keys and values (every position), and the kernel's tap.
struct HeadRows {
    std::vector<float> q, out, k, v;  // (T, Dh) each
    std::string backend;
    int kernel_key_tile = 0;
};

// Column block [offset, offset + dh) of each row of a (T, width) array.
std::vector<float> columns(const std::vector<float>& a, int width, int offset, int dh) {
    const std::size_t rows = a.size() / std::size_t(width);
    std::vector<float> out(rows * std::size_t(dh));
    for (std::size_t i = 0; i < rows; ++i)
        std::copy_n(a.begin() + std::ptrdiff_t(i * std::size_t(width) + std::size_t(offset)), dh,
                    out.begin() + std::ptrdiff_t(i * std::size_t(dh)));
    return out;
}

// The prefill on o.backend (gpu), the tap on layer o.layer's head o.head.
HeadRows run_gpu(const Weights& weights, std::span<const int32_t> tokens, const ChunkPlan& plan,
                 const BoundMask& mask, const FlashHeadOptions& o, FlashTrace& trace) {
    const ModelConfig& c = weights.config;
    LoadedModel model(weights, o.backend);
    Session session(model, SessionOptions{o.block_size, 0, mask});
    trace.k_pool = session.cache().storage().k_pool(o.layer).data;
    trace.head = o.head;
    ForwardProbes probes;
    probes.attention_rows = {o.layer};
    PrefillResult r;
    {
        const FlashTap tap(trace);
        r = session.prefill(tokens, plan, probes);
    }
    const int g = kv_head_of(o.head, c.n_heads, c.n_kv_heads), dh = c.head_dim;
    HeadRows h;
    h.q = columns(r.attention_rows[0].q, c.n_heads * dh, o.head * dh, dh);
    h.out = columns(r.attention_rows[0].out, c.n_heads * dh, o.head * dh, dh);
    h.k = columns(r.attention_rows[0].k, c.n_kv_heads * dh, g * dh, dh);
    h.v = columns(r.attention_rows[0].v, c.n_kv_heads * dh, g * dh, dh);
    h.backend = model.backend().name();
    // The kernel says which key tile it took; without a gpu backend no kernel ran.
    const int tile = model.backend().attention_tile_counts().key_tile;
    h.kernel_key_tile = tile > 0 ? tile : kFlashKernelKeyTile;
    return h;
}

// cpu-ref's attention (core/attention_reference.h: the functions cpu-ref runs) on
// the head's own q, k and v: one max, one sum in key order, one division. Also
// the score grid the viewer draws, and each output's scale for the tolerance:
// the largest |v| among the keys its row may see.
void reference_attention(const HeadRows& h, const BoundMask& mask, const FlashHeadOptions& o,
                         int n_tokens, int dh, FlashHeadRun& r) {
    const Mask m = mask.view();
    const AttentionShape s = attention_shape(n_tokens, 0, 1, 1, dh, n_tokens, m);
    HeadSoftmax whole =
        head_softmax(h.q.data(), h.k.data(), h.v.data(), n_tokens, dh, m, s.scale, o.head);
    r.reference = std::move(whole.out);
    r.scores = std::move(whole.scores);
    r.value_scale.assign(r.reference.size(), 0.0f);
    for (int p = 0; p < n_tokens; ++p) {
        const KeyRange kr = attention_key_range(s, p);
        for (int j = kr.lo; j <= kr.hi; ++j)
            for (int d = 0; d < dh; ++d) {
                float& x = r.value_scale[std::size_t(p) * std::size_t(dh) + std::size_t(d)];
                x = std::max(x, std::fabs(h.v[std::size_t(j) * std::size_t(dh) + std::size_t(d)]));
            }
    }
}

FlashHeadDiff diff(const std::vector<float>& a, const std::vector<float>& b,
                   const std::vector<float>& scale) {
    FlashHeadDiff d;
    for (std::size_t i = 0; i < a.size(); ++i) {
        d.max_abs = std::max(d.max_abs, std::fabs(a[i] - b[i]));
        const long long u = ulps_between(a[i], b[i]);
        d.max_ulps = std::max(d.max_ulps, u);
        d.differing += u != 0;
        d.worst = std::max(d.worst, std::fabs(double(a[i]) - double(b[i])) /
                                        (kFlashAtol + kFlashRtol * double(scale[i])));
    }
    return d;
}

// The port of the kernel's order over every chunk, at the walk's tile.
FlashOrderResult walk_chunks(const HeadRows& h, const ChunkPlan& plan, const BoundMask& mask,
                             const FlashHeadOptions& o, int dh, float scale,
                             std::vector<float>& output) {
    FlashOrderResult walk;
    int pos0 = 0;
    for (std::size_t c = 0; c < plan.lengths.size(); ++c) {
        const int len = plan.lengths[c];
        FlashOrderInput in;
        in.q = h.q.data() + std::size_t(pos0) * std::size_t(dh);
        in.k = h.k.data();
        in.v = h.v.data();
        in.n_queries = len;
        in.pos0 = pos0;
        in.n_keys = pos0 + len;
        in.head_dim = dh;
        in.head = o.head;
        in.scale = scale;
        in.mask = mask.view();
        in.query_tile = len <= 16 ? 16 : o.query_tile;  // the kernel's decode tiling
        in.key_tile = o.tile;
        in.chunk = int(c);
        flash_kernel_order(in, walk);
        output.insert(output.end(), walk.out.begin(), walk.out.end());
        pos0 += len;
    }
    return walk;
}

// The kernel's own states, from its tap, in the port's order; true when every
// one equals the port's bit for bit and neither has one the other lacks.
bool kernel_states(const FlashTrace& trace, FlashOrderResult& walk, long long& recorded) {
    std::map<std::pair<int, int>, std::vector<const FlashTraceLane*>> lanes;
    for (const FlashTraceLane& l : trace.lanes) lanes[{l.pos, l.key_lo}].push_back(&l);
    std::map<std::pair<int, int>, float> accs;
    for (const FlashTraceAcc& a : trace.accs) accs[{a.pos, a.key_lo}] = a.acc0;
    recorded = static_cast<long long>(lanes.size());
    bool same = lanes.size() == walk.states.size();
    for (FlashOrderState& st : walk.states) {
        const auto it = lanes.find({st.pos, st.key_lo});
        if (it == lanes.end() || it->second.size() != 8) {
            same = false;
            continue;
        }
        std::array<float, 8> share{};
        for (const FlashTraceLane* l : it->second) share[std::size_t(l->lane)] = l->l_share;
        FlashOrderState k = st;  // the kernel's, in place of the port's
        const FlashTraceLane& l0 = *it->second.front();
        k.m_old = l0.m_old;
        k.m = l0.m;
        k.rescale = l0.rescale;
        k.l = flash_lane_sum(share);
        k.acc0 = accs.count({st.pos, st.key_lo}) ? accs[{st.pos, st.key_lo}] : NAN;
        same = same && ulps_between(k.m, st.m) == 0 && ulps_between(k.l, st.l) == 0 &&
               ulps_between(k.rescale, st.rescale) == 0 && ulps_between(k.acc0, st.acc0) == 0 &&
               (k.m_old == st.m_old);
        st = k;
    }
    // The kernel's verdicts on the tiles it looked at.
    std::vector<std::tuple<int, int, int>> mine, its;
    for (const FlashOrderTile& t : walk.tiles)
        if (t.reached) mine.emplace_back(t.pos_lo, t.key_lo, int(t.kind));
    for (const FlashTraceTile& t : trace.tiles) its.emplace_back(t.pos_lo, t.key_lo, int(t.kind));
    std::sort(mine.begin(), mine.end());
    std::sort(its.begin(), its.end());
    return same && mine == its;
}

void count_tiles(FlashHeadRun& r) {
    for (const FlashOrderTile& t : r.walk.tiles) {
        if (!t.reached) {
            ++r.unreached;
        } else {
            r.skipped += t.kind == TileClass::empty;
            r.partial += t.kind == TileClass::partial;
            r.full += t.kind == TileClass::full;
        }
    }
}

}  // namespace

FlashHeadRun run_flash_head(const Weights& weights, std::span<const int32_t> tokens,
                            const ChunkPlan& plan, const BoundMask& mask,
                            const FlashHeadOptions& opt) {
    const ModelConfig& c = weights.config;
    PLAB_CHECK(
        opt.layer >= 0 && opt.layer < c.n_layers,
        "--layer " << opt.layer << " is out of range: the model has layers 0.." << c.n_layers - 1);
    PLAB_CHECK(
        opt.head >= 0 && opt.head < c.n_heads,
        "--head " << opt.head << " is out of range: the model has heads 0.." << c.n_heads - 1);
    PLAB_CHECK(opt.tile >= 0, "--tile " << opt.tile
                                        << " must be at least 1 (keys per tile; leave it out "
                                           "for the gpu kernel's own)");
    FlashTrace trace;
    const HeadRows h = run_gpu(weights, tokens, plan, mask, opt, trace);
    FlashHeadOptions o = opt;
    if (o.tile == 0) o.tile = h.kernel_key_tile;
    const int dh = c.head_dim, t = static_cast<int>(tokens.size());
    FlashHeadRun r;
    r.layer = o.layer;
    r.head = o.head;
    r.kv_head = kv_head_of(o.head, c.n_heads, c.n_kv_heads);
    r.head_dim = dh;
    r.n_tokens = t;
    r.backend = h.backend;
    r.mask = o.mask_spec;
    r.plan = plan;
    r.kernel_key_tile = h.kernel_key_tile;
    r.key_tile = o.tile;
    r.query_tile = o.query_tile;
    r.gpu = h.out;
    const float scale = attention_shape(1, 0, 1, 1, dh, 1).scale;
    r.walk = walk_chunks(h, plan, mask, o, dh, scale, r.output);
    r.recorded = o.tile == h.kernel_key_tile && !trace.lanes.empty();
    if (r.recorded) r.port_matches_kernel = kernel_states(trace, r.walk, r.kernel_states);
    count_tiles(r);
    reference_attention(h, mask, o, t, dh, r);
    r.vs_reference = diff(r.output, r.reference, r.value_scale);
    r.vs_gpu = diff(r.output, r.gpu, r.value_scale);
    r.gpu_vs_reference = diff(r.gpu, r.reference, r.value_scale);
    return r;
}

}  // namespace plab
