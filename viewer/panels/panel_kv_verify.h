// The KV panel's verify steps (lesson 18, speculative decoding): the chunk of
// the fed token and its guesses as rows on the mask grid, each coloured by the
// rule's verdict, and the blocks the roll-back gave back. panel_kv.cpp colours
// the cache's slots with the same verdicts.
#pragma once

#include <imgui.h>

#include <string>

#include "app/snapshot.h"

namespace plab::viewer {

// Row `row` of a verify step's chunk (0: the fed token, i: guess i): its colour
// and one line saying what the rule made of it.
ImU32 verify_row_colour(const KvStage& st, int row);
std::string verify_row_verdict(const KvStage& st, int row);

// The verify step in view: its rows over the keys they see, what each row's
// logits decided, the positions kept and rolled back, the blocks before and after.
void draw_kv_verify(const KvSnapshot& kv, const KvStage& st, const std::string& name,
                    bool rolled_back);

}  // namespace plab::viewer
