// The host stand-in (simt.h) extended to the GEMM's bf16 kernels that copy their stages from a
// split workspace (the split pass, or the split made on demand), for tests/test_gemm_emulated.py:
// every CUDA thread a fiber of the host thread (fibers.h), CTAs one after another. Shared
// memory is one 1024-aligned arena a CTA whose offsets are the kernel's 32-bit shared addresses
// (static arrays below DYNAMIC_BASE where the launch has dynamic shared memory, which starts
// there); the test removes the kernel's PTX wrappers and this header defines them for the host:
// - mbarriers: pending arrivals and transaction bytes, a phase flipping when both reach zero;
//   a wait gives way until the phase of the parity it names is over;
// - cp.async.bulk: a memcpy that completes its bytes on the mbarrier at once, checked for what
//   the instruction requires (16-byte aligned, a positive multiple of 16 bytes, inside the
//   launch's dynamic shared memory);
// - wgmma m64nNk16 bf16 with fp32 accumulation from two shared-memory descriptors (K-major, 128-
//   byte swizzle: an address's bits 4-6 XORed with its bits 7-9), computed when issued, each
//   thread its own accumulators in the instruction's fragment layout; fence, commit and wait
//   have nothing left to do;
// - the on-demand split's counters: host atomics (acquire / release); proxy fences: nothing
//   (the async proxy's ordering is not modelled);
// - warp shuffles, ballots and __syncwarp through a barrier of the warp's 32 threads, a warp
//   being 32 consecutive threads of the block's linear index; a shuffle or ballot is one phase
//   of it (its values double-buffered).
#pragma once
#include "simt.h"

#include <strings.h>

#define __align__(n) alignas(n)

struct alignas(16) uint4 { unsigned x, y, z, w; };
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }

namespace gemm {
constexpr size_t ARENA_BYTES = 256 * 1024;   // what an sm_90 SM's shared memory could hold
constexpr size_t DYNAMIC_BASE = 4096;         // static shared arrays below, dynamic from here

struct MBar { int expected = 0, pending = 0; long long tx = 0; unsigned phase = 0; };
using simt::Warp;   // a warp's barrier and its exchanges' buffers
struct Cta {
    unsigned char* base;
    size_t dynamic_bytes;
    size_t next_static = 64;
    std::map<std::string, size_t> statics;
    std::map<uint32_t, MBar> bars;
    std::vector<Warp*> warps;
    Cta(int threads, size_t dyn) : dynamic_bytes(dyn)
    {
        base = static_cast<unsigned char*>(aligned_alloc(1024, ARENA_BYTES));
        std::memset(base, 0xff, ARENA_BYTES);   // garbage, as on the GPU
        for (int w = 0; w < threads / 32; ++w) warps.push_back(new Warp());
    }
    ~Cta() { for (Warp* w : warps) delete w; std::free(base); }
};
inline Cta* cta = nullptr;   // a CUDA thread's own (gemm_main.cpp keeps it by its fiber)

inline unsigned char* at(uint32_t addr)
{
    if (addr >= ARENA_BYTES) {
        std::fprintf(stderr, "shared address %u outside the arena\n", addr);
        std::abort();
    }
    return cta->base + addr;
}
template <typename T> T* static_shared(const char* name, size_t count)
{
    auto found = cta->statics.find(name);
    if (found == cta->statics.end()) {
        const size_t offset = (cta->next_static + 63) / 64 * 64;
        cta->next_static = offset + count * sizeof(T);
        // below the dynamic shared memory, or anywhere in the arena when there is none
        if (cta->next_static > (cta->dynamic_bytes ? DYNAMIC_BASE : ARENA_BYTES)) {
            std::fprintf(stderr, "static shared arrays of %zu bytes do not fit\n",
                         cta->next_static);
            std::abort();
        }
        found = cta->statics.emplace(name, offset).first;
    }
    return reinterpret_cast<T*>(cta->base + found->second);
}
inline unsigned char* dynamic_shared() { return cta->base + DYNAMIC_BASE; }
inline int linear_tid() { return (int)(threadIdx.y * blockDim.x + threadIdx.x); }
inline Warp* warp() { return cta->warps[linear_tid() / 32]; }
}  // namespace gemm

inline size_t __cvta_generic_to_shared(const void* p)
{
    return (size_t)(static_cast<const unsigned char*>(p) - gemm::cta->base);
}

// ---- warps ---------------------------------------------------------------------------------
inline void __syncwarp(unsigned = 0xffffffffu) { gemm::warp()->bar.arrive_and_wait(); }
// every lane's value of an exchange (simt::publish: one phase of the warp's barrier)
inline const unsigned* simt_publish(unsigned v)
{
    return simt::publish(gemm::warp(), gemm::linear_tid() % 32, v);
}
inline unsigned simt_exchange(unsigned v, int from) { return simt_publish(v)[from]; }
inline int __shfl_sync(unsigned, int v, int from) { return (int)simt_exchange((unsigned)v, from); }
inline unsigned __shfl_sync(unsigned, unsigned v, int from) { return simt_exchange(v, from); }
inline unsigned __ballot_sync(unsigned, bool p)
{
    const unsigned* buf = simt_publish(p ? 1u : 0u);
    unsigned m = 0;
    for (int l = 0; l < 32; ++l) m |= buf[l] << l;
    return m;
}
inline int __ffs(int x) { return ffs(x); }
inline unsigned atomicAdd(unsigned* p, unsigned v)
{
    return std::atomic_ref<unsigned>(*p).fetch_add(v, std::memory_order_acq_rel);
}

// ---- bf16 ----------------------------------------------------------------------------------
inline uint32_t simt_bf16(float x)   // round to nearest even, as cvt.rn.bf16x2.f32
{
    uint32_t u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;   // NaN stays NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return u >> 16;
}
inline uint32_t bf_pack(float x0, float x1) { return simt_bf16(x1) << 16 | simt_bf16(x0); }
inline void bf_st_shared4(uint32_t dst, uint4 v)
{
    simt::check_aligned(gemm::at(dst), 16);
    std::memcpy(gemm::at(dst), &v, 16);
}

// ---- mbarriers and bulk copies -------------------------------------------------------------
inline void simt_mbar_step(uint32_t bar, int arrivals, long long bytes)
{
    gemm::MBar& b = gemm::cta->bars.at(bar);
    b.pending -= arrivals;
    b.tx += bytes;
    if (b.pending < 0 || b.tx < 0) {
        std::fprintf(stderr, "mbarrier %u: %d arrivals pending, %lld bytes\n", bar, b.pending, b.tx);
        std::abort();
    }
    if (b.pending == 0 && b.tx == 0) {
        b.phase ^= 1u;
        b.pending = b.expected;
    }
}
inline void bf_mbar_init(uint32_t bar, int count)
{
    gemm::cta->bars[bar] = gemm::MBar{count, count, 0, 0};
}
inline void bf_mbar_arrive(uint32_t bar) { simt_mbar_step(bar, 1, 0); }
inline void bf_mbar_expect_tx(uint32_t bar, uint32_t bytes) { simt_mbar_step(bar, 1, bytes); }
inline void bf_mbar_wait(uint32_t bar, uint32_t parity)
{
    while (gemm::cta->bars.at(bar).phase == parity) simt::yield();
}
inline void bf_bulk_copy(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar)
{
    if (bytes == 0 || bytes % 16 != 0 || dst % 16 != 0 ||
        reinterpret_cast<uintptr_t>(src) % 16 != 0 || dst < gemm::DYNAMIC_BASE ||
        dst + bytes > gemm::DYNAMIC_BASE + gemm::cta->dynamic_bytes) {
        std::fprintf(stderr, "bad bulk copy of %u bytes to %u (dynamic smem %zu)\n", bytes, dst,
                     gemm::cta->dynamic_bytes);
        std::abort();
    }
    std::memcpy(gemm::at(dst), src, bytes);
    simt_mbar_step(bar, 0, -(long long)bytes);
}
inline void bf_proxy_fence() {}

// ---- wgmma ---------------------------------------------------------------------------------
inline float simt_smem_bf16(uint32_t addr)   // the bf16 at a swizzled shared address
{
    const uint32_t phys = addr ^ (((addr >> 7) & 7u) << 4);
    uint16_t h;
    std::memcpy(&h, gemm::at(phys), 2);
    return __uint_as_float((uint32_t)h << 16);
}
// d (+)= A (64 x 16 from descriptor a) * B^T (N_ x 16 from descriptor b)^T: accumulator
// i = 4 j + 2 h + e of lane l of warp w (of the warpgroup) is D[16 w + l / 4 + 8 h][8 j + 2 (l % 4) + e]
// (the test puts a bf_wgmma calling it with the kernel's BN where the kernel's wrapper was)
template <int N_> inline void simt_wgmma(float* d, uint64_t a, uint64_t b, int accumulate)
{
    const uint32_t a0 = (uint32_t)(a & 0x3fffu) << 4, b0 = (uint32_t)(b & 0x3fffu) << 4;
    const int t = (int)threadIdx.x, w = t / 32, l = t % 32;
    for (int j = 0; j < N_ / 8; ++j)
        for (int h = 0; h < 2; ++h)
            for (int e = 0; e < 2; ++e) {
                const int m = 16 * w + l / 4 + 8 * h, n = 8 * j + 2 * (l % 4) + e;
                float s = 0.0f;
                for (int k = 0; k < 16; ++k)
                    s += simt_smem_bf16(a0 + m * 128 + 2 * k) * simt_smem_bf16(b0 + n * 128 + 2 * k);
                float& acc = d[4 * j + 2 * h + e];
                acc = accumulate ? acc + s : s;
            }
}
inline void bf_wg_fence() {}
inline void bf_wg_commit() {}
template <int N_> inline void bf_wg_wait() {}

// ---- the on-demand split's counters --------------------------------------------------------
inline unsigned od_ld_relaxed(const unsigned* p)
{
    return std::atomic_ref<unsigned>(*const_cast<unsigned*>(p)).load(std::memory_order_acquire);
}
inline void od_add_release(unsigned* p)
{
    std::atomic_ref<unsigned>(*p).fetch_add(1u, std::memory_order_release);
}
inline void od_fence_acquire() { std::atomic_thread_fence(std::memory_order_acquire); }
inline void od_proxy_fence() {}
