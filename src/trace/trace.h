// Trace: timestamped events of one request, from arrival to delivery.
//
// What it teaches: prefill time is not TTFT. Time to first token runs from the
// request's arrival to the first token's delivery: queueing, tokenization,
// copies, every prefill chunk, sampling and delivery. The trace records each
// stage as a span with a name, so TTFT and prefill time are computed from named
// start and end points, never assumed equal (lessons/05-ttft-is-not-prefill.md).
// Export: Chrome Trace Event JSON, opened by Perfetto or chrome://tracing.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace plab {

struct TraceEvent {
    std::string name;                         // "prefill chunk", "kv append", "decode step", ...
    std::string category;                     // "request", "prefill", "kv", "decode", "sample", ...
    double start_us = 0;                      // microseconds since the trace began
    double dur_us = 0;                        // 0 for an instant event
    std::map<std::string, std::string> args;  // e.g. {"layer":"0","positions":"0-3","blocks":"0"}
};

class Trace {
public:
    Trace();

    double now_us() const;
    void add(TraceEvent e);
    // An event on its own named track ("request 3", "engine steps") instead of
    // the host track (or the device track, for category "device").
    void add_on_track(TraceEvent e, std::string track);
    // A span from start_us to now.
    void span(std::string name, std::string category, double start_us,
              std::map<std::string, std::string> args = {});
    void instant(std::string name, std::string category,
                 std::map<std::string, std::string> args = {});

    const std::vector<TraceEvent>& events() const { return events_; }
    // First event with this name, if any.
    std::optional<TraceEvent> find(const std::string& name) const;
    // Start of the first event named `from` to the end of the first event named `to`.
    std::optional<double> between_us(const std::string& from, const std::string& to) const;
    // Sum of durations of every event with this name.
    double total_us(const std::string& name) const;

    // Chrome Trace Event JSON ("traceEvents": [...], ph "X" spans and "i" instants).
    std::string to_chrome_json() const;
    void write_chrome_json(const std::string& path) const;

    // When false, add() does nothing (benchmarks turn per-layer events off).
    bool enabled = true;
    // When true, a GPU backend also times every op of a prefill on the device
    // (CUDA events): spans of category "device", drawn on their own track.
    // Off by default: the events cost a little on every launch.
    bool device_ops = false;

private:
    std::chrono::steady_clock::time_point origin_;
    std::vector<TraceEvent> events_;
    std::vector<std::string> tracks_;  // parallel to events_: "" = host or device track
};

}  // namespace plab
