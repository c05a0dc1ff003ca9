// The SIMT emulator behind kernels/simt/simt.h when g++ compiles the kernels.
//
// What it teaches: how a GPU block behaves, in a few hundred lines. Every
// thread of a block is a fiber: its own small stack, all on one OS thread.
// The scheduler runs the fibers in a shuffled order until each one either
// finishes or waits at a barrier; then it releases a barrier
// that everyone it concerns has reached (__syncthreads: the whole block; a
// warp shuffle: the warp's lanes), and repeats. If nothing can be released
// while some fibers still wait, the kernel is broken (a barrier inside a
// branch, or after an early return) and we say so with the kernel's name.
//
// Switching: a fresh fiber is entered by pointing the stack pointer at its
// stack and calling fiber_main (start_fiber; makecontext/swapcontext on other
// CPUs); every later switch is _setjmp/_longjmp, which (unlike swapcontext)
// saves no signal mask through a system call, so a barrier costs well under a
// microsecond per thread.
//
// Under AddressSanitizer every switch is announced (its fiber API: start
// before the jump, finish after it), so ASan knows which stack runs and checks
// the kernels' loads and stores on device buffers, which here are host memory.
//
// Left out on purpose: running blocks in parallel (blocks run one after
// another, so function-local statics serve as __shared__), and checking that a
// device pointer is not dereferenced on the host (both live in one memory).

// glibc's fortified longjmp refuses to jump to another stack; fibers must.
#undef _FORTIFY_SOURCE
#include <setjmp.h>
#include <ucontext.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <vector>

#include "core/random.h"
#include "simt/simt.h"

namespace plab::simt {

Builtins g_builtins;

namespace {

// AddressSanitizer's fiber API, or nothing. `save` keeps the leaving stack's
// fake frames (nullptr: the leaving fiber is done); finish reports the stack
// we came from, which is how a fiber learns where the scheduler's stack is.
#if defined(__SANITIZE_ADDRESS__)
void asan_start_switch(void** save, const void* bottom, std::size_t size) {
    __sanitizer_start_switch_fiber(save, bottom, size);
}
void asan_finish_switch(void* save, const void** from_bottom, std::size_t* from_size) {
    __sanitizer_finish_switch_fiber(save, from_bottom, from_size);
}
#else
void asan_start_switch(void**, const void*, std::size_t) {}
void asan_finish_switch(void*, const void**, std::size_t*) {}
#endif

constexpr std::size_t kStackBytes = 64 * 1024;  // kernels keep a few hundred floats at most
constexpr unsigned kMaxThreadsPerBlock = 1024;  // as on every CUDA GPU since sm_20

enum class FiberState { ready, at_barrier, at_warp_barrier, done };

struct Fiber {
    ucontext_t context;  // for the first entry only
    jmp_buf resume_point;
    bool started = false;
    std::unique_ptr<char[]> stack;
    FiberState state = FiberState::done;
    dim3 idx;
    const char* barrier_file = nullptr;  // where it waits, to report divergent barriers
    int barrier_line = 0;
    const char* warp_file = nullptr;  // the shuffle or __syncwarp it waits at
    bool warp_fence = false;          // it waits at a __syncwarp (not a shuffle)
    int warp_line = 0;
    void* asan_fake_stack = nullptr;  // ASan's fake frames while it waits
};

struct Scheduler {
    std::mutex mutex;  // one launch at a time per process: statics are per-block storage
    ucontext_t main_context;
    jmp_buf scheduler_point;  // where a fiber jumps back to when it waits or ends
    std::vector<Fiber> fibers;
    std::vector<std::uint64_t> warp_slots;  // one exchange slot per thread
    std::vector<unsigned char> dynamic_shared;
    // Static shared arrays (PLAB_SHARED) the running kernel has declared so far.
    std::vector<std::pair<void*, std::size_t>> static_arrays;
    std::size_t static_bytes = 0;
    std::uintptr_t kernel_key = 0;
    int current = -1;
    int n_threads = 0;
    const char* kernel = "";
    void (*body)(void*) = nullptr;
    void* ctx = nullptr;
    std::exception_ptr error;
    random::Engine rng{20240607u};
    std::uint64_t block_order_seed = 0;  // 0: blocks in order
    // The scheduler's own stack, as ASan's fiber API reports it to a fiber.
    void* asan_fake_stack = nullptr;
    const void* asan_stack_bottom = nullptr;
    std::size_t asan_stack_size = 0;
};

Scheduler& scheduler() {
    static Scheduler s;
    return s;
}

// Per kernel (keyed by its address): the cudaFuncAttributeMaxDynamicSharedMemorySize
// it opted in to (-1: none, the 48 KiB default applies), and its static
// shared bytes as learned from the PLAB_SHARED declarations it has run.
struct KernelLimits {
    long long max_dynamic = -1;
    std::size_t static_bytes = 0;
    bool static_known = false;  // a launch has run to the end
};
std::mutex g_limits_mutex;
std::map<std::uintptr_t, KernelLimits>& kernel_limits() {
    static std::map<std::uintptr_t, KernelLimits> m;
    return m;
}
KernelLimits limits_of(std::uintptr_t kernel) {
    std::lock_guard<std::mutex> lock(g_limits_mutex);
    const auto it = kernel_limits().find(kernel);
    return it == kernel_limits().end() ? KernelLimits{} : it->second;
}

// The rule CUDA applies at launch: dynamic bytes within the kernel's maximum
// (the opted-in attribute, or 48 KiB less its static bytes), and static +
// dynamic within the device's opt-in maximum. Empty when the launch fits.
std::string shared_memory_problem(std::size_t static_bytes, std::size_t dynamic_bytes,
                                  long long max_dynamic) {
    std::ostringstream os;
    const std::size_t total = static_bytes + dynamic_bytes;
    const ArchProfile& arch = arch_profile();
    if (total > arch.shared_per_block) {
        os << "needs " << static_bytes << " B static + " << dynamic_bytes
           << " B dynamic = " << total << " B of shared memory per block; the emulated "
           << arch.name << " device (" << arch.card << ", PLAB_SIMT_ARCH) allows at most "
           << arch.shared_per_block << " B (" << arch.shared_per_block / 1024
           << " KiB) even with cudaFuncSetAttribute";
    } else if (max_dynamic < 0 && total > kDefaultSharedBytes) {
        os << "needs " << static_bytes << " B static + " << dynamic_bytes
           << " B dynamic = " << total << " B of shared memory per block, over the "
           << kDefaultSharedBytes
           << " B (48 KiB) default; opt in first with cudaFuncSetAttribute(kernel, "
              "cudaFuncAttributeMaxDynamicSharedMemorySize, "
           << dynamic_bytes << ") (reserve_shared_memory does)";
    } else if (max_dynamic >= 0 && static_cast<long long>(dynamic_bytes) > max_dynamic) {
        os << "launched with " << dynamic_bytes << " B of dynamic shared memory, over the "
           << max_dynamic << " B it opted in to with cudaFuncAttributeMaxDynamicSharedMemorySize";
    }
    return os.str();
}

void fiber_main() {
    Scheduler& s = scheduler();
    asan_finish_switch(nullptr, &s.asan_stack_bottom, &s.asan_stack_size);
    try {
        s.body(s.ctx);
    } catch (...) {
        if (!s.error) s.error = std::current_exception();
    }
    s.fibers[s.current].state = FiberState::done;
    asan_start_switch(nullptr, s.asan_stack_bottom, s.asan_stack_size);
    _longjmp(s.scheduler_point, 1);  // never resumed: the next block re-makes the fiber
}

// Enters a fresh fiber at fiber_main on its own stack. On x86-64 and AArch64
// this is two instructions (point the stack pointer at the fiber's stack, call);
// elsewhere swapcontext, which costs a system call. fiber_main never returns:
// it leaves by _longjmp, which restores the scheduler's registers and stack.
void start_fiber(Scheduler& s, Fiber& f) {
#if defined(__x86_64__) || defined(__aarch64__)
    (void)s;
    const auto top =
        reinterpret_cast<std::uintptr_t>(f.stack.get() + kStackBytes) & ~std::uintptr_t{15};
#if defined(__x86_64__)
    asm volatile("mov %0, %%rsp\n\tcall *%1" : : "r"(top), "r"(&fiber_main) : "memory");
#else
    asm volatile("mov sp, %0\n\tblr %1" : : "r"(top), "r"(&fiber_main) : "memory");
#endif
    __builtin_unreachable();
#else
    makecontext(&f.context, fiber_main, 0);
    swapcontext(&s.main_context, &f.context);
#endif
}

void resume(Scheduler& s, int i) {
    Fiber& f = s.fibers[i];
    s.current = i;
    g_race_clock.thread = i;        // whose accesses the checked arrays record
    g_builtins.thread_idx = f.idx;  // threadIdx is the running fiber's, always
    if (_setjmp(s.scheduler_point) == 0) {
        asan_start_switch(&s.asan_fake_stack, f.stack.get(), kStackBytes);
        if (!f.started) {
            f.started = true;
            start_fiber(s, f);  // returns only through a _longjmp to scheduler_point
        } else {
            _longjmp(f.resume_point, 1);
        }
    }
    asan_finish_switch(s.asan_fake_stack, nullptr, nullptr);  // back on the scheduler's stack
    s.current = -1;
    g_race_clock.thread = -1;
}

// Yields from the running fiber back to the scheduler in `state`.
void wait_here(FiberState state) {
    Scheduler& s = scheduler();
    PLAB_ASSERT(s.current >= 0);  // __syncthreads or a shuffle called outside a kernel
    Fiber& f = s.fibers[s.current];
    f.state = state;
    if (_setjmp(f.resume_point) == 0) {
        asan_start_switch(&f.asan_fake_stack, s.asan_stack_bottom, s.asan_stack_size);
        _longjmp(s.scheduler_point, 1);
    }
    asan_finish_switch(f.asan_fake_stack, &s.asan_stack_bottom, &s.asan_stack_size);
}

// "simt.h" for "/path/to/simt.h": a report names files as a reader finds them.
std::string base_name(const char* path) {
    if (path == nullptr) return "?";
    const char* slash = std::strrchr(path, '/');
    return slash != nullptr ? slash + 1 : path;
}

std::string thread_name(const dim3& t) {
    std::ostringstream os;
    os << "threadIdx (" << t.x << ',' << t.y << ',' << t.z << ')';
    return os.str();
}

[[noreturn]] void fail(const Scheduler& s, const std::string& what) {
    std::ostringstream os;
    os << "SIMT emulator: kernel " << s.kernel << " block (" << g_builtins.block_idx.x << ','
       << g_builtins.block_idx.y << ',' << g_builtins.block_idx.z << "): " << what;
    throw InternalError(os.str());
}

// Releases the barriers whose threads have all arrived; returns false when
// none could be released (then the block can never finish).
bool release_barriers(Scheduler& s) {
    bool released = false;
    // 1. Warp barriers (shuffles): all present lanes of a warp must be there.
    for (int w0 = 0; w0 < s.n_threads; w0 += 32) {
        const int w1 = std::min(s.n_threads, w0 + 32);
        int waiting = 0, finished = 0;
        for (int i = w0; i < w1; ++i) {
            waiting += s.fibers[i].state == FiberState::at_warp_barrier;
            finished += s.fibers[i].state == FiberState::done;
        }
        if (waiting == w1 - w0) {
            for (int i = w0 + 1; i < w1; ++i) {
                const Fiber& a = s.fibers[w0];
                const Fiber& b = s.fibers[i];
                if (a.warp_line != b.warp_line || std::strcmp(a.warp_file, b.warp_file) != 0)
                    fail(s, "the lanes of warp " + std::to_string(w0 / 32) +
                                " meet at different shuffles: " + thread_name(a.idx) + " at " +
                                base_name(a.warp_file) + ":" + std::to_string(a.warp_line) + ", " +
                                thread_name(b.idx) + " at " + base_name(b.warp_file) + ":" +
                                std::to_string(b.warp_line) +
                                " (a shuffle in divergent code: every lane of the mask must call "
                                "the same one; a lab rule, stricter than PTX on sm_70+)");
            }
            for (int i = w0; i < w1; ++i) s.fibers[i].state = FiberState::ready;
            // A __syncwarp: the lanes' shared-memory writes are visible to each other.
            if (s.fibers[w0].warp_fence) ++g_race_clock.warp_epoch[w0 / 32];
            released = true;
        } else if (waiting > 0 && finished > 0) {
            fail(s, "a warp shuffle waits for lanes that have already exited (warp " +
                        std::to_string(w0 / 32) + ")");
        }
    }
    if (released) return true;
    // 2. The block barrier: every thread at the same __syncthreads.
    int waiting = 0;
    const Fiber* first = nullptr;
    const Fiber* exited = nullptr;
    for (int i = 0; i < s.n_threads; ++i) {
        const Fiber& f = s.fibers[i];
        if (f.state == FiberState::at_barrier) {
            ++waiting;
            if (first == nullptr) first = &f;
            if (f.barrier_line != first->barrier_line || f.barrier_file != first->barrier_file) {
                fail(s, thread_name(first->idx) + " waits at __syncthreads line " +
                            std::to_string(first->barrier_line) + " but " + thread_name(f.idx) +
                            " at line " + std::to_string(f.barrier_line) +
                            " (a barrier in divergent code)");
            }
        } else if (f.state == FiberState::done && exited == nullptr) {
            exited = &f;
        }
    }
    if (waiting == s.n_threads) {
        for (int i = 0; i < s.n_threads; ++i) s.fibers[i].state = FiberState::ready;
        // A new barrier interval (simt_checked.h), never reused: what was
        // written before the barrier may now be read by anyone.
        ++g_race_clock.interval;
        return true;
    }
    if (waiting > 0 && exited != nullptr) {
        fail(s, std::to_string(waiting) + " threads wait at __syncthreads (" + first->barrier_file +
                    ":" + std::to_string(first->barrier_line) + ") that " +
                    thread_name(exited->idx) +
                    " never reaches: it has returned (undefined behaviour in CUDA)");
    }
    return false;
}

void run_block(Scheduler& s) {
    const dim3 bd = g_builtins.block_dim;
    ++g_race_clock.interval;  // a block starts a new interval: earlier records are old
    // Fresh shared memory is garbage on a GPU; here it is NaN (all bits set),
    // so reading a value nobody wrote poisons the result instead of passing.
    std::fill(s.dynamic_shared.begin(), s.dynamic_shared.end(), 0xff);
    for (const auto& [address, bytes] : s.static_arrays) std::memset(address, 0xff, bytes);
    for (int i = 0; i < s.n_threads; ++i) {
        Fiber& f = s.fibers[i];
        f.idx = dim3(i % bd.x, (i / bd.x) % bd.y, i / (bd.x * bd.y));
        f.state = FiberState::ready;
        f.started = false;
#if defined(__SANITIZE_ADDRESS__)
        // Frames a fiber left by _longjmp stay poisoned in ASan's shadow memory.
        ASAN_UNPOISON_MEMORY_REGION(f.stack.get(), kStackBytes);
#endif
    }
    std::vector<int> order(s.n_threads);
    for (;;) {
        // Between two barriers, run the ready fibers in a new random order:
        // a race between a write and a read of shared memory shows up.
        order.clear();
        for (int i = 0; i < s.n_threads; ++i) {
            if (s.fibers[i].state == FiberState::ready) order.push_back(i);
        }
        random::shuffle(order.begin(), order.end(), s.rng);
        for (int i : order) {
            resume(s, i);
            if (s.error) std::rethrow_exception(std::exchange(s.error, nullptr));
        }
        const bool all_done =
            std::all_of(s.fibers.begin(), s.fibers.begin() + s.n_threads,
                        [](const Fiber& f) { return f.state == FiberState::done; });
        if (all_done) return;
        if (!release_barriers(s)) fail(s, "deadlock: threads wait at barriers that never open");
    }
}

}  // namespace

void run_grid(const char* name, std::uintptr_t kernel, dim3 grid, dim3 block,
              std::size_t shared_bytes, void (*body)(void*), void* ctx) {
    Scheduler& s = scheduler();
    std::lock_guard<std::mutex> lock(s.mutex);
    static const bool order_from_environment = [&s] {
        const char* e = std::getenv("PLAB_SIMT_BLOCK_ORDER");
        if (e == nullptr || *e == '\0') return true;
        char* end = nullptr;
        const unsigned long long seed = std::strtoull(e, &end, 10);
        if (*end != '\0' || *e == '-')
            throw Error(std::string("PLAB_SIMT_BLOCK_ORDER=") + e +
                        ": give a seed (a whole number) for blocks in a shuffled order, or 0 for "
                        "blocks in order");
        s.block_order_seed = seed;
        return true;
    }();
    (void)order_from_environment;
    const unsigned long long n = 1ull * block.x * block.y * block.z;
    if (grid.x * grid.y * grid.z == 0) return;
    if (n == 0 || n > kMaxThreadsPerBlock) {
        std::ostringstream os;
        os << "SIMT emulator: kernel " << name << " launched with " << n << " threads per block ("
           << "1.." << kMaxThreadsPerBlock << " allowed)";
        throw InternalError(os.str());
    }
    // The grid and block limits of every architecture since sm_30 (the
    // profile's numbers): a launch past them fails on a GPU, so it fails here.
    const ArchProfile& arch = arch_profile();
    if (grid.x > arch.max_grid_x || grid.y > arch.max_grid_yz || grid.z > arch.max_grid_yz ||
        block.x > arch.max_block_xy || block.y > arch.max_block_xy || block.z > arch.max_block_z) {
        std::ostringstream os;
        os << "SIMT emulator: kernel " << name << " launched with grid (" << grid.x << ',' << grid.y
           << ',' << grid.z << ") and block (" << block.x << ',' << block.y << ',' << block.z
           << "); " << arch.name << " allows a grid up to (" << arch.max_grid_x << ','
           << arch.max_grid_yz << ',' << arch.max_grid_yz << ") and a block up to ("
           << arch.max_block_xy << ',' << arch.max_block_xy << ',' << arch.max_block_z << ')';
        throw InternalError(os.str());
    }
    // Shared memory: the static bytes known from earlier launches now; the
    // rest as the kernel's PLAB_SHARED declarations run (static_shared).
    const KernelLimits limits = limits_of(kernel);
    const std::string problem =
        shared_memory_problem(limits.static_bytes, shared_bytes, limits.max_dynamic);
    if (!problem.empty())
        throw InternalError("SIMT emulator: kernel " + std::string(name) + " " + problem);
    s.kernel_key = kernel;
    s.static_arrays.clear();
    s.static_bytes = 0;
    s.kernel = name;
    s.body = body;
    s.ctx = ctx;
    s.n_threads = static_cast<int>(n);
    while (s.fibers.size() < n) {
        s.fibers.emplace_back();
        s.fibers.back().stack = std::make_unique<char[]>(kStackBytes);
        Fiber& f = s.fibers.back();
        getcontext(&f.context);  // used by start_fiber's portable fallback only
        f.context.uc_stack.ss_sp = f.stack.get();
        f.context.uc_stack.ss_size = kStackBytes;
        f.context.uc_link = nullptr;
    }
    s.warp_slots.assign(n, 0);
    s.dynamic_shared.assign(shared_bytes, 0xff);
    g_builtins.block_dim = block;
    g_builtins.grid_dim = grid;
    std::vector<dim3> blocks;
    for (unsigned z = 0; z < grid.z; ++z)
        for (unsigned y = 0; y < grid.y; ++y)
            for (unsigned x = 0; x < grid.x; ++x) blocks.emplace_back(x, y, z);
    if (s.block_order_seed != 0) {
        random::Engine order(s.block_order_seed);
        random::shuffle(blocks.begin(), blocks.end(), order);
    }
    for (const dim3& b : blocks) {
        g_builtins.block_idx = b;
        run_block(s);
    }
    std::lock_guard<std::mutex> limits_lock(g_limits_mutex);
    kernel_limits()[kernel].static_known = true;
}

void sync_threads(const char* file, int line) {
    Scheduler& s = scheduler();
    PLAB_ASSERT(s.current >= 0);
    s.fibers[s.current].barrier_file = file;
    s.fibers[s.current].barrier_line = line;
    wait_here(FiberState::at_barrier);
}

int lane_id() {
    return scheduler().current % 32;
}

int warp_lanes() {
    const Scheduler& s = scheduler();
    const int w0 = s.current - s.current % 32;
    return std::min(32, s.n_threads - w0);
}

void sync_warp(unsigned mask, const char* what, const char* file, int line) {
    const int lanes = warp_lanes();
    const unsigned full = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1u;
    if ((mask & full) != full) {
        std::ostringstream os;
        os << "SIMT emulator: kernel " << scheduler().kernel << ": " << what << " with mask 0x"
           << std::hex << mask << "; the emulator supports only whole-warp shuffles (0x" << full
           << ')';
        throw InternalError(os.str());
    }
    Scheduler& s = scheduler();
    s.fibers[s.current].warp_file = file != nullptr ? file : what;
    s.fibers[s.current].warp_line = line;
    s.fibers[s.current].warp_fence = std::strcmp(what, "__syncwarp") == 0;
    wait_here(FiberState::at_warp_barrier);
}

std::string current_thread_name() {
    const Scheduler& s = scheduler();
    return thread_name(s.fibers[s.current].idx);
}

void fail_launch(const std::string& what) {
    fail(scheduler(), what);
}

void RaceBook::fail_index(long long i, std::size_t size, const std::source_location& at) const {
    fail_launch(current_thread_name() + " indexes shared tile `" + name_ + "`[" +
                std::to_string(i) + "] at " + base_name(at.file_name()) + ":" +
                std::to_string(at.line()) + ", outside its " + std::to_string(size) +
                " elements (0.." + std::to_string(size - 1) + ")");
}

void RaceBook::fail_race(std::size_t i, const char* doing, const std::source_location& at,
                         const char* tail) const {
    const Record& r = records_[i];
    fail_launch("race on shared tile `" + std::string(name_) + "`[" + std::to_string(i) +
                "]: " + current_thread_name() + " " + doing + " it (" + base_name(at.file_name()) +
                ":" + std::to_string(at.line()) + ") after " +
                thread_name(scheduler().fibers[r.thread].idx) + " wrote it (" + base_name(r.file) +
                ":" + std::to_string(r.line) + ") with no __syncthreads between" + tail);
}

void set_block_order_seed(std::uint64_t seed) {
    scheduler().block_order_seed = seed;
}

std::size_t dynamic_shared_bytes() {
    return scheduler().dynamic_shared.size();
}

std::uint64_t* warp_slot(int lane) {
    Scheduler& s = scheduler();
    return &s.warp_slots[s.current - s.current % 32 + lane];
}

void* dynamic_shared() {
    Scheduler& s = scheduler();
    return s.dynamic_shared.empty() ? nullptr : s.dynamic_shared.data();
}

void static_shared(void* address, std::size_t bytes) {
    Scheduler& s = scheduler();
    PLAB_ASSERT(s.current >= 0);  // PLAB_SHARED outside a kernel
    for (const auto& a : s.static_arrays)
        if (a.first == address) return;
    // First thread of the launch to reach this declaration: nobody has written
    // the array yet in this block, so poison it now (later blocks: run_block).
    std::memset(address, 0xff, bytes);
    s.static_arrays.emplace_back(address, bytes);
    s.static_bytes += bytes;
    KernelLimits limits;
    {
        std::lock_guard<std::mutex> lock(g_limits_mutex);
        KernelLimits& l = kernel_limits()[s.kernel_key];
        l.static_bytes = std::max(l.static_bytes, s.static_bytes);
        limits = l;
    }
    const std::string problem =
        shared_memory_problem(s.static_bytes, s.dynamic_shared.size(), limits.max_dynamic);
    if (!problem.empty()) fail(s, problem);
}

void set_max_dynamic_shared(std::uintptr_t kernel, long long bytes) {
    std::lock_guard<std::mutex> lock(g_limits_mutex);
    kernel_limits()[kernel].max_dynamic = bytes;
}

long long max_dynamic_shared(std::uintptr_t kernel) {
    return limits_of(kernel).max_dynamic;
}

std::size_t known_static_shared(std::uintptr_t kernel) {
    return limits_of(kernel).static_bytes;
}

bool static_shared_known(std::uintptr_t kernel) {
    return limits_of(kernel).static_known;
}

// ---- the emulated device: one architecture profile ---------------------------
namespace {
const ArchProfile* find_profile(const char* name) {
    for (const ArchProfile& p : kArchProfiles)
        if (std::strcmp(p.name, name) == 0) return &p;
    std::string valid;
    for (const ArchProfile& p : kArchProfiles)
        valid += (valid.empty() ? "" : "|") + std::string(p.name);
    PLAB_CHECK(false,
               "PLAB_SIMT_ARCH=" << name << " is not an emulated architecture; use " << valid);
    return nullptr;
}
std::mutex g_arch_mutex;
const ArchProfile* g_arch = nullptr;
}  // namespace

const ArchProfile& arch_profile() {
    std::lock_guard<std::mutex> lock(g_arch_mutex);
    if (g_arch == nullptr) {
        const char* env = std::getenv("PLAB_SIMT_ARCH");
        g_arch = find_profile(env != nullptr && env[0] != '\0' ? env : "sm_90");
    }
    return *g_arch;
}

const char* set_arch_profile(const char* name) {
    const char* previous = arch_profile().name;
    const ArchProfile* next = find_profile(name);
    std::lock_guard<std::mutex> lock(g_arch_mutex);
    g_arch = next;
    return previous;
}

// ---- device memory: host memory with a little bookkeeping -----------------------
namespace {
std::mutex g_alloc_mutex;
std::set<void*> g_allocations;
cudaError_t g_last_error = cudaSuccess;
}  // namespace

cudaError_t cudaMalloc(void** ptr, std::size_t bytes) {
    // 256-byte alignment, as cudaMalloc guarantees.
    void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
    if (p == nullptr) return g_last_error = cudaErrorMemoryAllocation;
    // Fresh device memory is garbage on a GPU; here every byte is 0xff (a
    // float reads NaN), so a kernel that reads what nobody wrote fails.
    std::memset(p, 0xff, (bytes + 255) / 256 * 256 + 256);
    std::lock_guard<std::mutex> lock(g_alloc_mutex);
    g_allocations.insert(p);
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
    if (ptr == nullptr) return cudaSuccess;
    std::lock_guard<std::mutex> lock(g_alloc_mutex);
    if (g_allocations.erase(ptr) == 0) return g_last_error = cudaErrorInvalidValue;
    std::free(ptr);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind) {
    if (bytes == 0) return cudaSuccess;
    if (dst == nullptr || src == nullptr) return g_last_error = cudaErrorInvalidValue;
    std::memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemset(void* dst, int value, std::size_t bytes) {
    if (bytes == 0) return cudaSuccess;
    if (dst == nullptr) return g_last_error = cudaErrorInvalidValue;
    std::memset(dst, value, bytes);
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
    *device = 0;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
    if (device != 0) return g_last_error = cudaErrorInvalidValue;
    switch (attr) {
        case cudaDevAttrMaxSharedMemoryPerBlock:
            *value = static_cast<int>(kDefaultSharedBytes);
            return cudaSuccess;
        case cudaDevAttrMaxSharedMemoryPerBlockOptin:
            *value = static_cast<int>(arch_profile().shared_per_block);
            return cudaSuccess;
        case cudaDevAttrMaxSharedMemoryPerMultiprocessor:
            *value = static_cast<int>(arch_profile().shared_per_sm);
            return cudaSuccess;
        case cudaDevAttrMultiProcessorCount:
            *value = arch_profile().multiprocessors;
            return cudaSuccess;
        case cudaDevAttrWarpSize:
            *value = arch_profile().warp_size;
            return cudaSuccess;
    }
    return g_last_error = cudaErrorInvalidValue;
}

cudaError_t cudaDeviceSynchronize() {
    return cudaSuccess;
}

cudaError_t cudaGetLastError() {
    return std::exchange(g_last_error, cudaSuccess);
}

const char* cudaGetErrorName(cudaError_t err) {
    switch (err) {
        case cudaSuccess:
            return "cudaSuccess";
        case cudaErrorInvalidValue:
            return "cudaErrorInvalidValue";
        case cudaErrorMemoryAllocation:
            return "cudaErrorMemoryAllocation";
    }
    return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t err) {
    switch (err) {
        case cudaSuccess:
            return "no error";
        case cudaErrorInvalidValue:
            return "invalid argument";
        case cudaErrorMemoryAllocation:
            return "out of memory";
    }
    return "unknown error";
}

}  // namespace plab::simt
