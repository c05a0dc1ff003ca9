// Pre-tokenizer splits of Hugging Face tokenizer.json, as hand-written scanners.
//
// What it teaches: before BPE sees a text, a regex cuts it into pieces (words
// with their leading space, runs of digits, punctuation, whitespace), and no
// merge ever crosses a piece boundary. The regex is part of the model: GPT-2,
// Llama 3 and Qwen 2 each ship one in tokenizer.json, and the same merges with
// another split give other ids. The three patterns are
//
//   GPT-2   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   Llama 3 (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//           ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   Qwen 2  the same with \p{N} instead of \p{N}{1,3}
//
// Each alternative becomes a small function of the text at one position;
// at each position the first alternative that matches wins (a regex's
// leftmost-first rule), and backtracking is spelled out where it matters
// (\s+(?!\S) leaves the last space for the next word). The independent check
// is tests/reference/hf_tokenizer_reference.py, which runs the regex text
// from the file through Python's `re`.
// Left out: any other regex (they are refused, naming the three known ones).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace plab::hf {

enum class SplitPattern { kGpt2, kLlama3, kQwen2 };

// The pattern a Split pre-tokenizer's "Regex" text is, or nullopt.
std::optional<SplitPattern> split_pattern_from_regex(std::string_view regex);
const char* split_pattern_regex(SplitPattern p);

// The pieces of `text` (they cover it exactly, in order; none is empty).
std::vector<std::string_view> split_pieces(std::string_view text, SplitPattern p);

// The Digits pre-tokenizer: numbers (\p{N}) isolated, one per piece when
// `individual`, else runs of them; everything between them kept as pieces.
std::vector<std::string_view> split_digits(std::string_view text, bool individual);

}  // namespace plab::hf
