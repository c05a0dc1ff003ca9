// The `plab` command behind each scene, one builder per scene: the rows of the
// scene table (scenes.h) point here, and view_command.h asks the shown scene's row.
// What it teaches: every number a panel shows comes from one `plab` subcommand
// with the same inputs, so a student can reproduce it (view_command.h).
#pragma once

#include <string>
#include <vector>

#include "app/snapshot.h"
#include "app/viewer_state.h"

namespace plab::viewer {

// What every scene's command is built from.
struct CommandInputs {
    const ViewerState& state;
    const Snapshot& snap;
    const std::string& model_dir;  // the directory the viewer loaded
    // The prompt's ids as the mask panel encoded them, for the panels that run the same prompt.
    const std::vector<int32_t>& prompt_ids;
};

// Each builder returns the command's words, or nothing with `why_not` saying why
// (a prompt cut to ids not known yet).
using SceneCommand = std::vector<std::string> (*)(const CommandInputs& in, std::string& why_not);
std::vector<std::string> toy_command(const CommandInputs& in, std::string& why_not);
std::vector<std::string> mask_command(const CommandInputs& in, std::string& why_not);
std::vector<std::string> kv_command(const CommandInputs& in, std::string& why_not);
std::vector<std::string> equivalence_command(const CommandInputs& in, std::string& why_not);
std::vector<std::string> timeline_command(const CommandInputs& in, std::string& why_not);
std::vector<std::string> serving_command(const CommandInputs& in, std::string& why_not);
std::vector<std::string> flash_command(const CommandInputs& in, std::string& why_not);

}  // namespace plab::viewer
