// Fuzz harness: JSON Lines files (serving/json_lines.h) as their two readers
// take them — `plab serve --workload` (serving/workload.h parse_workload) and
// `plab generate --prompts` (cli/prompts_file.h parse_prompts).
//
// Input: byte 0 even -> a workload, odd -> a prompts file; the rest is the
// file's text. An accepted file must keep the readers' promises: at least one
// request, line numbers rising and inside the file, arrivals sorted, lengths
// in range, no prompt empty or holding a line ending. Seeds:
// corpus/json_lines/ (make_seeds.py): CRLF, a byte order mark, blank lines.
#include <algorithm>
#include <string>

#include "cli/prompts_file.h"
#include "fuzz_util.h"
#include "serving/workload.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const std::string text(plab::fuzz::as_text(data + 1, size - 1));
    const int lines = 1 + static_cast<int>(std::count(text.begin(), text.end(), '\n'));
    if (data[0] % 2 == 0) {
        plab::fuzz::refusal_is_fine([&] {
            const plab::Workload w = plab::parse_workload(text, "fuzz.jsonl");
            PLAB_FUZZ_REQUIRE(!w.requests.empty());
            int last_line = 0;
            double last_arrival = 0;
            for (const plab::WorkloadRequest& r : w.requests) {
                PLAB_FUZZ_REQUIRE(r.line > last_line && r.line <= lines);
                PLAB_FUZZ_REQUIRE(r.arrival_s >= last_arrival);
                PLAB_FUZZ_REQUIRE(r.prompt.empty() != (r.prompt_tokens == 0));
                PLAB_FUZZ_REQUIRE(r.prompt_tokens >= 0 && r.prompt_tokens <= (1 << 20));
                PLAB_FUZZ_REQUIRE(r.max_new_tokens >= 1 && r.max_new_tokens <= (1 << 20));
                last_line = r.line;
                last_arrival = r.arrival_s;
            }
        });
    } else {
        plab::fuzz::refusal_is_fine([&] {
            const auto prompts = plab::cli::parse_prompts(text, "fuzz.txt");
            PLAB_FUZZ_REQUIRE(!prompts.empty());
            int last_line = 0;
            for (const plab::cli::PromptLine& p : prompts) {
                PLAB_FUZZ_REQUIRE(p.line > last_line && p.line <= lines);
                PLAB_FUZZ_REQUIRE(!p.text.empty());
                PLAB_FUZZ_REQUIRE(!p.max_new_tokens || *p.max_new_tokens >= 1);
                last_line = p.line;
            }
        });
    }
    return 0;
}
