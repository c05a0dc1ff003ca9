// `plab flash --model M --layer L --head H`: the flash command's model-head
// mode (cmd_flash_model.cpp), called by cmd_flash.cpp when a model, a layer or
// a head is named. Lesson: 17 (FlashAttention).
#pragma once

#include <string>

#include "cli/common.h"

namespace plab::cli {

struct FlashModelOptions {
    std::string model;  // "" = the built-in model
    PromptOptions prompt;
    std::string chunks = "full";
    int layer = 0, head = 0;
    int tile = 0;  // 0: the gpu kernel's own key tile
    std::string mask = "causal";
    bool json = false;
};

void run_flash_model(const FlashModelOptions& o);

}  // namespace plab::cli
