// "The command for this view": the `plab` command line that reproduces the numbers a
// panel shows, for a lecturer to hand to students (a button copies it, --print-command
// prints it headless).
//
// What it teaches: the viewer is a window onto the same engine the CLI drives; every
// panel's numbers come from one `plab` subcommand with the same inputs (model, prompt,
// backend, chunk plan, mask, block size), so a student can run it, read its --json and
// find the panel's first token and probabilities bit for bit. Left out on purpose: the
// view settings that change no number (layer and head shown, colour scale, step cursor)
// and a random-weights model (no model directory for `plab` to load: no command then).
// No ImGui here: tests/viewer tests it without a window.
#pragma once

#include <string>
#include <vector>

#include "app/snapshot.h"
#include "app/viewer_state.h"

namespace plab::viewer {

// POSIX shell quoting: a word of only safe characters stays as it is, anything else
// goes inside single quotes, a quote inside written '\'' (so "it's $HOME" reaches the
// program unchanged, in sh, bash and zsh alike).
std::string shell_quote(const std::string& word);

// The words joined into one line, each quoted.
std::string shell_join(const std::vector<std::string>& words);

// The command for the shown scene, as words ("plab", "prefill", "--model", ...).
// `model_dir` is the directory the viewer loaded. Empty when no command reproduces
// the panel (random weights; a panel whose inputs failed): `why_not` says why.
std::vector<std::string> view_command(const ViewerState& state, const Snapshot& snap,
                                      const std::string& model_dir, std::string& why_not);

// What the viewer computed that the command's --json reports too, one line: for the
// mask and KV panels "first token ID, top ID:PROB ..." with each probability as a
// C99 hex float (its exact bits); for the serving scene "serving: N steps, P
// preemptions; prompt tokens A,B,...; arrival_s X,...; ttft_ms Y,..." (times as hex
// floats, per request as --json lists them); for the flash scene "flash: N steps, R
// rescales, S skipped; output X,...; full Y,..." (hex floats, per query); "" for panels
// without such numbers.
std::string view_numbers(const ViewerState& state, const Snapshot& snap);

}  // namespace plab::viewer
