#include "trace/trace.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace plab {

Trace::Trace() : origin_(std::chrono::steady_clock::now()) {}

double Trace::now_us() const {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - origin_)
        .count();
}

void Trace::add(TraceEvent e) {
    add_on_track(std::move(e), "");
}

void Trace::add_on_track(TraceEvent e, std::string track) {
    if (!enabled) return;
    events_.push_back(std::move(e));
    tracks_.push_back(std::move(track));
}

void Trace::span(std::string name, std::string category, double start_us,
                 std::map<std::string, std::string> args) {
    add({std::move(name), std::move(category), start_us, now_us() - start_us, std::move(args)});
}

void Trace::instant(std::string name, std::string category,
                    std::map<std::string, std::string> args) {
    add({std::move(name), std::move(category), now_us(), 0.0, std::move(args)});
}

std::optional<TraceEvent> Trace::find(const std::string& name) const {
    for (const auto& e : events_) {
        if (e.name == name) return e;
    }
    return std::nullopt;
}

std::optional<double> Trace::between_us(const std::string& from, const std::string& to) const {
    const auto a = find(from), b = find(to);
    if (!a || !b) return std::nullopt;
    return b->start_us + b->dur_us - a->start_us;
}

double Trace::total_us(const std::string& name) const {
    double t = 0;
    for (const auto& e : events_) {
        if (e.name == name) t += e.dur_us;
    }
    return t;
}

std::string Trace::to_chrome_json() const {
    nlohmann::json events = nlohmann::json::array();
    // Two tracks: the host (tid 1) and the device's own clock (tid 2, category
    // "device"): device ops overlap host spans rather than nest inside them.
    const auto track_name = [&](int tid, const char* name) {
        events.push_back({{"name", "thread_name"},
                          {"ph", "M"},
                          {"pid", 1},
                          {"tid", tid},
                          {"args", {{"name", name}}}});
    };
    track_name(1, "host");
    bool device_track = false;
    // Named tracks from tid 3, in order of first appearance.
    std::map<std::string, int> named;
    for (const auto& e : events_) {
        int tid = e.category == "device" ? 2 : 1;
        const std::string& track = tracks_[static_cast<std::size_t>(&e - events_.data())];
        if (!track.empty()) {
            const auto found = named.find(track);
            if (found == named.end()) {
                tid = 3 + static_cast<int>(named.size());
                named.emplace(track, tid);
                track_name(tid, track.c_str());
            } else {
                tid = found->second;
            }
        } else if (tid == 2 && !device_track) {
            device_track = true;
            track_name(2, "device (CUDA events)");
        }
        nlohmann::json j = {{"name", e.name}, {"cat", e.category}, {"ts", e.start_us},
                            {"pid", 1},       {"tid", tid},        {"args", e.args}};
        if (e.dur_us > 0) {
            j["ph"] = "X";
            j["dur"] = e.dur_us;
        } else {
            j["ph"] = "i";
            j["s"] = "t";
        }
        events.push_back(std::move(j));
    }
    return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump(1);
}

void Trace::write_chrome_json(const std::string& path) const {
    std::ofstream f(path);
    PLAB_CHECK(f.good(), "cannot write trace file " << path);
    f << to_chrome_json() << "\n";
    PLAB_CHECK(f.good(), "writing trace file " << path << " failed");
}

}  // namespace plab
