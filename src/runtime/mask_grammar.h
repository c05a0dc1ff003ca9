// Mask specs: the text a person writes (`window:8+sink:2`), checked and turned
// into the core/mask.h value every backend reads.
//
// What it teaches: a mask is data, so it can be written down, validated once
// and shipped to any device. The grammar (`plab mask --help` prints it):
//
//   // clang-format off
//   spec      := group ( '|' group )*         OR of groups (FlexAttention's or_masks)
//   group     := item ( '+' item )*           AND of the group's masks (and_masks)
//   item      := causal                       k <= q
//              | window:W                     the last W keys, itself included
//              | sink:S                       with a window in its group: keys 0..S-1 stay
//                                             visible (attention sinks, StreamingLLM)
//              | dilated:W,D                  W keys spaced D apart: q, q-D, ..., q-(W-1)D
//              | chunked:L                    causal inside chunks of L positions (Llama 4)
//              | prefix:P                     positions 0..P-1 see each other (prefix-LM)
//              | docs:N1,N2,...               packed documents of these lengths (sum = T)
//              | docs:bos                     a new document at every BOS token
//              | file:PATH                    a T x T matrix of 0/1, one row per query
//              | alibi                        modifier: ALiBi distance penalty (Press et al. 2022)
//              | softcap:C                    modifier: C·tanh(s/C) (Gemma 2)
//   // clang-format on
//
// Modifiers apply to the whole mask wherever they are written. A mask that
// lets a query see keys after itself (prefix-LM, a custom file) cannot be cut
// into chunks anywhere: check_plan_for_mask refuses such a plan with the rule
// and a plan that works.
// Left out: nesting deeper than OR-of-ANDs, per-head masks.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/mask.h"
#include "runtime/chunk_plan.h"

namespace plab {

// One item of a spec as written (before it meets a prompt).
struct MaskItem {
    MaskKind kind = MaskKind::causal;
    int a = 0, b = 0;
    std::vector<int> lengths;   // docs:N1,N2,...
    bool split_at_bos = false;  // docs:bos
    std::string path;           // file:PATH
    bool new_group = false;
    std::string text;  // the item as written, for messages
};

struct MaskSpec {
    std::string text;  // the spec as given
    std::vector<MaskItem> items;
    bool alibi = false;
    float softcap = 0.0f;
};

// One kind of item in the grammar: a row of the table parse_mask_spec reads
// (mask_grammar.cpp), so the help, the messages and the parser never disagree.
struct MaskItemKind {
    const char* name;   // before the ':' ("window")
    const char* forms;  // as written, comma-separated ("window:W")
    bool modifier;      // changes scores, not which keys are seen (alibi, softcap)
    const char* help;   // its lines of the grammar `plab mask --help` prints
};
std::vector<MaskItemKind> mask_item_kinds();
// The grammar as `plab mask --help` prints it, from the table.
std::string mask_grammar_help();

// Parses the grammar above; throws plab::Error naming what is wrong and what would be right.
MaskSpec parse_mask_spec(std::string_view text);

// What binding a spec needs to know about the prompt and the model.
struct MaskContext {
    std::span<const int32_t> tokens;  // the prompt (its length T; docs:bos reads the ids)
    int bos_id = -1;                  // the tokenizer's BOS id; -1 when it has none
    int n_heads = 0;                  // H, for the ALiBi slopes
};

// A spec bound to a prompt: the Mask value plus the data words it points to.
class BoundMask {
public:
    BoundMask() = default;  // causal
    BoundMask(std::string spec, Mask mask, std::vector<uint32_t> words);

    const std::string& spec() const { return spec_; }
    // The mask pointing at this object's words (host memory). Valid while this object lives.
    Mask view() const;
    bool is_causal() const { return mask_.n_terms == 0 && !mask_.alibi && mask_.softcap == 0; }
    // First query position a decode step may not use (a custom file's size), 0 = none.
    int limit() const { return mask_.limit; }

private:
    std::string spec_ = "causal";
    Mask mask_;
    std::vector<uint32_t> words_;
};

// Checks the spec against the prompt (prefix within it, document lengths
// summing to it, a custom file of T rows of T values 0/1 and no empty row) and builds it.
BoundMask bind_mask(const MaskSpec& spec, const MaskContext& context);
// The T x T matrix of a `file:` item, from the file's text (blank lines and '#'
// comments skipped; values '0110' or '0 1 1 0'); `where` names the file in errors.
std::vector<std::vector<bool>> parse_custom_mask(std::string_view text, int n_tokens,
                                                 const std::string& where);
// parse + bind in one step.
BoundMask make_mask(std::string_view spec, const MaskContext& context);
// A spec bound to `n_positions` positions of one head with no token ids (the toy,
// the graders' cases): docs:bos finds no BOS, ALiBi takes one head's slope (1/256).
BoundMask make_mask_one_head(std::string_view spec, int n_positions);

// The ALiBi slopes of n heads (Press et al. 2022): 2^(-8i/n), i = 1..n, for n a
// power of two; otherwise those of the nearest lower power of two, followed by
// every other slope of the next higher one.
std::vector<double> alibi_slopes(int n_heads);

// Refuses a chunk plan (prefill starting at position start_pos) under which
// some query would need a key its chunk has not computed yet — that plan would
// silently give another answer than the whole prompt at once. The message names
// the rule and a plan that works.
void check_plan_for_mask(const Mask& mask, const ChunkPlan& plan, int start_pos = 0);
// The plan check_plan_for_mask accepts that is closest to `plan`: each chunk
// grown until all its queries' keys lie inside it.
ChunkPlan nearest_valid_plan(const Mask& mask, const ChunkPlan& plan, int start_pos = 0);

// Counts for `plab mask` and the tests: visible (query, key) pairs of a prompt
// of T tokens, and the causal count T(T+1)/2 they compare with.
long long count_visible_pairs(const Mask& mask, int n_tokens);

// The tile map of a T-token prompt in tiles of `tile` positions: (tiles, tiles)
// row-major, query tiles down, key tiles across.
std::vector<TileClass> tile_map(const Mask& mask, int n_tokens, int tile);

}  // namespace plab
