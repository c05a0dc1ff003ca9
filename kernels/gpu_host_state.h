// The host side's two helpers of the GPU backends (gpu_backend.cu): device
// op timing (OpClock, TimedOp) and small integer arrays kept on the device
// between ops (ResidentArray).
//
// What it teaches: timing that measures kernels. A host clock
// around a launch times the launch, so each op is bracketed by two CUDA
// events instead; and the arrays every layer of a chunk reads (its KV slots,
// its block table) cross the bus once per chunk, asynchronously from pinned
// memory, instead of once per layer. While a step graph records, an array a
// recorded launch reads is never rewritten under it. Included by gpu_backend.cu only, in
// both builds (plab::gpu_native and plab::gpu_emulated).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "core/backend.h"
#include "simt/simt_async.h"

namespace plab::PLAB_SIMT_NS::gpu_host {

// Device-side op timing: a pair of CUDA events per op, reused between reads.
class OpClock {
public:
    OpClock() = default;
    ~OpClock() {
        for (auto& e : events_) {
            cudaEventDestroy(e.start);
            cudaEventDestroy(e.stop);
        }
    }
    OpClock(const OpClock&) = delete;
    OpClock& operator=(const OpClock&) = delete;

    bool on = false;

    // Records the start of op `name`; returns its index, or -1 when timing is off.
    int start(const char* name) {
        if (!on) return -1;
        if (used_ == events_.size()) {
            Pair p;
            PLAB_CUDA_CHECK(cudaEventCreate(&p.start));
            PLAB_CUDA_CHECK(cudaEventCreate(&p.stop));
            events_.push_back(p);
        }
        events_[used_].name = name;
        PLAB_CUDA_CHECK(cudaEventRecord(events_[used_].start, 0));
        return static_cast<int>(used_++);
    }
    // Records the end of op i. Unchecked because it runs in a destructor: a
    // failing record here is reported by the next checked call.
    void stop(int i) noexcept {
        if (i >= 0) cudaEventRecord(events_[std::size_t(i)].stop, 0);
    }
    // Every op timed since the last take, in launch order (waits for the last one).
    std::vector<DeviceOpTime> take() {
        std::vector<DeviceOpTime> out;
        if (used_ == 0) return out;
        PLAB_CUDA_CHECK(cudaEventSynchronize(events_[used_ - 1].stop));
        for (std::size_t i = 0; i < used_; ++i) {
            float from_first = 0, ms = 0;
            PLAB_CUDA_CHECK(cudaEventElapsedTime(&from_first, events_[0].start, events_[i].start));
            PLAB_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i].start, events_[i].stop));
            out.push_back({events_[i].name, from_first, ms});
        }
        used_ = 0;
        return out;
    }

private:
    struct Pair {
        cudaEvent_t start = nullptr;
        cudaEvent_t stop = nullptr;
        const char* name = "";
    };
    std::vector<Pair> events_;
    std::size_t used_ = 0;  // pairs recorded since the last take()
};

// One op timed from construction to destruction (nothing when timing is off).
class TimedOp {
public:
    TimedOp(OpClock& clock, const char* name) : clock_(clock), index_(clock.start(name)) {}
    ~TimedOp() { clock_.stop(index_); }
    TimedOp(const TimedOp&) = delete;
    TimedOp& operator=(const TimedOp&) = delete;

private:
    OpClock& clock_;
    int index_;
};

// A small array of 32-bit integers (tokens, KV slots, a block table, a mask's
// data words) kept on the device between ops and copied again only when it
// changes. Every layer of a chunk reads the same slots and block table, so
// they cross the bus once per chunk instead of once per layer. The copy is
// asynchronous, from pinned host memory: the host writes the pinned staging
// area only after the device has finished reading its previous contents.
template <typename T>
class ResidentArray {
public:
    ResidentArray() = default;
    ~ResidentArray() {
        if (ready_ != nullptr) cudaEventDestroy(ready_);
        cudaFreeHost(staging_);
        cudaFree(device_);
    }
    ResidentArray(const ResidentArray&) = delete;
    ResidentArray& operator=(const ResidentArray&) = delete;

    const T* upload(std::span<const T> values, OpClock& clock) {
        simt::LaunchRecorder* recorder = simt::active_recorder;
        if (valid_ && values.size() == host_.size() &&
            std::equal(values.begin(), values.end(), host_.begin())) {
            return handed_out(recorder);  // already there: no copy
        }
        // While a step graph records (step_graph.h), a launch recorded in this
        // step may read the old contents: it runs first.
        if (recorder != nullptr && handed_epoch_ == recorder->epoch) recorder->flush();
        if (ready_ == nullptr) PLAB_CUDA_CHECK(cudaEventCreate(&ready_));
        // The previous copy out of the staging area must be done before it is
        // rewritten (or freed).
        PLAB_CUDA_CHECK(cudaEventSynchronize(ready_));
        if (values.size() > capacity_) {
            // cudaFree waits for the device, so no queued kernel still reads it.
            PLAB_CUDA_CHECK(cudaFree(device_));
            PLAB_CUDA_CHECK(cudaFreeHost(staging_));
            device_ = nullptr;
            staging_ = nullptr;
            capacity_ = std::max<std::size_t>(values.size(), 1024);
            PLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&device_), capacity_ * sizeof(T)));
            PLAB_CUDA_CHECK(
                cudaMallocHost(reinterpret_cast<void**>(&staging_), capacity_ * sizeof(T)));
        }
        if (!values.empty()) std::memcpy(staging_, values.data(), values.size() * sizeof(T));
        {
            TimedOp t(clock, "upload");
            PLAB_CUDA_CHECK(cudaMemcpyAsync(device_, staging_, values.size() * sizeof(T),
                                            cudaMemcpyHostToDevice, 0));
        }
        PLAB_CUDA_CHECK(cudaEventRecord(ready_, 0));
        host_.assign(values.begin(), values.end());
        valid_ = true;
        return handed_out(recorder);
    }

private:
    const T* handed_out(const simt::LaunchRecorder* recorder) {
        handed_epoch_ = recorder != nullptr ? recorder->epoch : 0;
        return device_;
    }

    T* device_ = nullptr;
    T* staging_ = nullptr;  // pinned host memory
    std::size_t capacity_ = 0;
    cudaEvent_t ready_ = nullptr;  // recorded after the last copy out of staging_
    std::vector<T> host_;          // what device_ holds now
    bool valid_ = false;
    std::uint64_t handed_epoch_ = 0;  // the recording that last got device_ (0: none)
};

}  // namespace plab::PLAB_SIMT_NS::gpu_host
