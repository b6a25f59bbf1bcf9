// Runs generated CUDA C on the CPU, for tests on machines without an NVIDIA GPU.
//
// Included before a generated kernel file (g++ -include), it maps CUDA's spelling onto
// C++20: each block runs as one std::thread per CUDA thread (blocks one after another),
// __shared__ arrays are function statics (one block lives at a time), __syncthreads is a
// barrier of the block's threads, and the warp intrinsics follow their documented
// semantics: a warp is 32 consecutive linear thread indices; __shfl_down_sync(mask, x,
// delta, width) waits for every lane named in `mask` (the caller must be one of them),
// then returns x of lane + delta, or the caller's own x where that lane is past the end
// of its group of `width` lanes; __syncwarp(mask) waits for the lanes of `mask`. A lane
// outside its mask aborts; lanes that never arrive hang (the test's timeout catches it).
// It checks what generated code computes under those rules, not GPU timing or memory
// ordering beyond what the barriers give.
#pragma once

#include <barrier>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};
struct alignas(8) float2 {
    float x, y;
};
struct alignas(16) float4 {
    float x, y, z, w;
};

namespace tt_emu {

inline dim3 grid_dim, block_dim;
inline thread_local dim3 thread_idx, block_idx;
inline std::barrier<>* block_barrier = nullptr;

struct Warp {
    std::mutex lock;
    std::map<unsigned, std::unique_ptr<std::barrier<>>> groups;  // one per lane mask
    std::uint64_t slots[32] = {};
};
inline std::vector<Warp>* warps = nullptr;

inline unsigned linear_thread() {
    return thread_idx.x + block_dim.x * (thread_idx.y + block_dim.y * thread_idx.z);
}

inline std::barrier<>& group(unsigned mask) {
    unsigned lane = linear_thread() % 32;
    if (!((mask >> lane) & 1u)) std::abort();  // a lane must name itself in its mask
    Warp& warp = (*warps)[linear_thread() / 32];
    std::lock_guard<std::mutex> hold(warp.lock);
    auto& barrier = warp.groups[mask];
    if (!barrier) barrier = std::make_unique<std::barrier<>>(std::popcount(mask));
    return *barrier;
}

template <class T>
T shfl_down(unsigned mask, T x, int delta, int width) {
    static_assert(sizeof(T) <= sizeof(std::uint64_t));
    std::barrier<>& together = group(mask);
    Warp& warp = (*warps)[linear_thread() / 32];
    unsigned lane = linear_thread() % 32;
    std::memcpy(&warp.slots[lane], &x, sizeof(T));
    together.arrive_and_wait();  // every lane's value is in its slot
    T y = x;
    if (lane % width + delta < unsigned(width)) {
        if (!((mask >> (lane + delta)) & 1u)) std::abort();  // reading a lane not in mask
        std::memcpy(&y, &warp.slots[lane + delta], sizeof(T));
    }
    together.arrive_and_wait();  // every lane has read before the slots are reused
    return y;
}

template <class Kernel>
void launch(dim3 grid, dim3 block, Kernel kernel) {
    unsigned threads = block.x * block.y * block.z;
    grid_dim = grid;
    block_dim = block;
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx) {
                std::barrier<> barrier(threads);
                std::vector<Warp> block_warps((threads + 31) / 32);
                block_barrier = &barrier;
                warps = &block_warps;
                std::vector<std::thread> pool;
                for (unsigned t = 0; t < threads; ++t)
                    pool.emplace_back([=] {
                        thread_idx = {t % block.x, t / block.x % block.y,
                                      t / (block.x * block.y)};
                        block_idx = {bx, by, bz};
                        kernel();
                    });
                for (auto& th : pool) th.join();
            }
}

}  // namespace tt_emu

inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __restrict__ __restrict
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define threadIdx tt_emu::thread_idx
#define blockIdx tt_emu::block_idx
#define blockDim tt_emu::block_dim
#define gridDim tt_emu::grid_dim
#define __syncthreads() tt_emu::block_barrier->arrive_and_wait()
#define __syncwarp(mask) tt_emu::group(mask).arrive_and_wait()
#define __shfl_down_sync tt_emu::shfl_down
