// A decode step as one CUDA graph: record, compare, replay.
//
// What it teaches: batch-1 decode is memory-bound work (each weight byte is
// read for ~0.5 FLOP), but ~50 separate launches a step make the
// implementation latency-bound: a few microseconds of CPU and driver time
// each, while the kernels themselves take about as long. A CUDA graph hands
// the driver the whole list once and then launches it with one call.
//
// How (kernels/simt/simt_record.h): between begin() and end() every launch is
// recorded, not run, and compared as it comes with the last step's, launch
// for launch, byte for byte (a launch that matches builds no record: a
// replayed step allocates nothing for its ~50 launches). At end():
//   - different (the first decode step, a new shape, an array that moved):
//     run the records now, in order, one launch each, and keep them;
//   - the same, for the first time: capture them into a graph (native:
//     stream capture and cudaGraphInstantiate), then launch it;
//   - the same again: launch the graph (replay).
// Equal records mean equal launches, so a replay runs exactly the kernels a
// direct run would, on the same arguments: the same bits. What changes from
// step to step (the token, the positions, the slots, the block tables) must
// therefore live in device memory, copied there before the graph runs; a
// value passed by value (attention's pos0, RoPE's first position) would make
// every step's records differ. The gpu backend passes those through device
// memory while recording (gpu_backend.cu).
//
// Host code that must see results, or rewrite what a pending launch reads,
// calls flush() first: pending launches run now, and the step is not replayed
// (it ran in two parts). The emulator has no graphs: there a "graph" is the
// kept records, and a replay runs them, the same closures in the same order.
#pragma once

#include <utility>
#include <vector>

#include "core/backend.h"
#include "simt/simt.h"

namespace plab::PLAB_SIMT_NS::gpu_host {

class StepGraph {
public:
    StepGraph() = default;
    ~StepGraph() {
        cancel();
        drop_graph();
#if !PLAB_SIMT_EMULATED
        if (stream_ != nullptr) cudaStreamDestroy(stream_);
#endif
    }
    StepGraph(const StepGraph&) = delete;
    StepGraph& operator=(const StepGraph&) = delete;

    bool recording() const {
        return simt::active_recorder == &recorder_;
    }

    void begin() {
        PLAB_ASSERT(simt::active_recorder == nullptr);
        recorder_.reset(&kept_);  // compared with the last step's as they come
        recorder_.epoch = ++epoch_;
        simt::active_recorder = &recorder_;
    }

    // Runs what is pending now (see the header comment); recording goes on.
    void flush() {
        if (recording()) recorder_.flush();
    }

    // An op threw: drop the step's records; nothing of it runs.
    void cancel() noexcept {
        if (!recording()) return;
        simt::active_recorder = nullptr;
        recorder_.reset(nullptr);
    }

    void end() {
        if (!recording()) return;
        simt::active_recorder = nullptr;
        last_built_ = recorder_.built;
        if (recorder_.matching() && recorder_.flushes == 0 && recorder_.matched == kept_.size()) {
            // Every launch matched the last step's, in order: nothing was built.
            if (!captured_) {
                capture();
                ++counts_.captured;
            } else {
                ++counts_.replayed;
            }
            launch_graph();
            return;
        }
        recorder_.diverge();  // fewer launches than the last step: build those there were
        last_built_ = recorder_.built;
        const bool flushed = recorder_.flushes != 0;
        std::vector<simt::LaunchRecord> step = std::move(recorder_.records);
        recorder_.reset(nullptr);
        drop_graph();
        for (simt::LaunchRecord& r : step) r.launch(nullptr);
        ++counts_.direct;
        // A step that flushed ran in parts: nothing to replay next time.
        kept_ = flushed ? std::vector<simt::LaunchRecord>{} : std::move(step);
    }

    StepGraphCounts counts() const {
        return counts_;
    }
    // Launch records the last step built (0 when it repeated the step before).
    std::size_t records_built() const {
        return last_built_;
    }

private:
    // The kept records become the graph.
    void capture() {
#if !PLAB_SIMT_EMULATED
        // The legacy default stream cannot be captured: a stream of our own,
        // recorded only (nothing runs during capture).
        if (stream_ == nullptr)
            PLAB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        PLAB_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
        try {
            for (simt::LaunchRecord& r : kept_) r.launch(stream_);
        } catch (...) {
            cudaGraph_t broken = nullptr;
            cudaStreamEndCapture(stream_, &broken);
            if (broken != nullptr) cudaGraphDestroy(broken);
            throw;
        }
        cudaGraph_t graph = nullptr;
        PLAB_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
        const cudaError_t err = cudaGraphInstantiate(&exec_, graph, 0);
        cudaGraphDestroy(graph);
        PLAB_CUDA_CHECK(err);
#endif
        captured_ = true;
    }

    // On the default stream: after the copies the ops queued (the token, the
    // positions, the slots), before the copy back of the logits.
    void launch_graph() {
#if !PLAB_SIMT_EMULATED
        PLAB_CUDA_CHECK(cudaGraphLaunch(exec_, 0));
#else
        for (simt::LaunchRecord& r : kept_) r.launch(nullptr);
#endif
    }

    void drop_graph() noexcept {
#if !PLAB_SIMT_EMULATED
        if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
        exec_ = nullptr;
#endif
        captured_ = false;
    }

    simt::LaunchRecorder recorder_;
    std::uint64_t epoch_ = 0;
    std::vector<simt::LaunchRecord> kept_;  // the last step's launches: the graph's, once captured
    bool captured_ = false;
    StepGraphCounts counts_;
    std::size_t last_built_ = 0;
#if !PLAB_SIMT_EMULATED
    cudaStream_t stream_ = nullptr;
    cudaGraphExec_t exec_ = nullptr;
#endif
};

}  // namespace plab::PLAB_SIMT_NS::gpu_host
