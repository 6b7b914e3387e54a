// A CPU stand-in for the CUDA features the softmax kernels use, to run a rendered kernel
// thread by thread on the host (tests/test_softmax_emulated.py). Every CUDA thread of the CTAs
// that run together is a fiber of the one host thread (simt::Fibers in fibers.h: its own
// stack, switched with swapcontext). A fiber gives way only where a CUDA thread would wait: at
// a barrier whose phase is not over (__syncthreads, a warp shuffle, the cluster barrier:
// simt::Barrier) and in the kernel's spin loops (an mbarrier's phase, a spread group's
// arrivals). The fibers are resumed in sweeps, forward and backward in turn, so that of two
// threads neither always runs first between two barriers. A shuffle is one phase of its warp's
// barrier, its values double-buffered. __shared__ arrays (rewritten to simt::shared by the
// test) live in one arena per CTA, and map_shared_rank finds the same array in another CTA of
// the cluster. Vector loads and stores through __ldg / __ldcs / __stcs / st_ptx abort on a
// misaligned address, as the GPU would fault.
// A spread group's CTAs (consecutive CTAs waiting for each other through global memory) run
// together like a cluster's. Bulk copies (the test removes the kernel's PTX wrappers): a copy
// is a memcpy that completes its mbarrier's phase at once, checked for what cp.async.bulk
// requires (16-byte aligned addresses, a size that is a positive multiple of 16, inside the
// dynamic shared memory the launch gave); waits give way until the phase parity turns. The
// async proxy's ordering is not modelled.
#pragma once
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <optional>
#include <string>
#include <vector>
#include <algorithm>

struct simt_uint3 { unsigned x, y, z; };
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
inline float2 make_float2(float a, float b) { return {a, b}; }
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }

namespace simt {
// the running fiber gives way to the others (tests/simt/fibers.h, which the launcher includes)
void yield();

// std::barrier's arrive / wait / arrive_and_wait for a fixed count: the last arrival of a
// phase resets the count and advances the phase; a waiter gives way until the phase it arrived
// in is over
class Barrier {
public:
    using arrival_token = unsigned;
    explicit Barrier(int count) : expected_(count), remaining_(count) {}
    arrival_token arrive()
    {
        const unsigned phase = phase_;
        if (--remaining_ == 0) {
            remaining_ = expected_;
            ++phase_;
        }
        return phase;
    }
    void wait(arrival_token phase) const
    {
        while (phase_ == phase) yield();
    }
    void arrive_and_wait() { wait(arrive()); }
    // the phase now: the one a caller that has not yet arrived will arrive in
    unsigned phase() const { return phase_; }

private:
    const int expected_;
    int remaining_;
    unsigned phase_ = 0;
};

// a warp's barrier, and two buffers for the 32-bit values its lanes publish: a publication
// uses the buffer of its barrier phase's parity
struct Warp {
    Barrier bar{32};
    unsigned buf[2][32];
};
// a lane's 32 bits published to its warp (a shuffle, an exchange, a ballot): written to the
// buffer of the phase it arrives in, then one phase of the warp's barrier; returns that buffer,
// every lane's value in it. A lane writes this buffer again two phases later at the earliest,
// which it can only reach once every lane has arrived at the phase between, i.e. has read this
// one, so one barrier a publication is enough
inline const unsigned* publish(Warp* w, int lane, unsigned bits)
{
    unsigned* buf = w->buf[w->bar.phase() & 1u];   // the phase cannot end before this arrival
    buf[lane] = bits;
    w->bar.arrive_and_wait();
    return buf;
}
struct Cta {
    Barrier bar;
    std::vector<Warp*> warps;
    std::map<std::string, std::vector<char>> arena;
    explicit Cta(int threads) : bar(threads) {
        for (int w = 0; w < threads / 32; ++w) warps.push_back(new Warp());
    }
    ~Cta() { for (Warp* w : warps) delete w; }
};
struct Cluster {
    Barrier bar;
    std::vector<Cta*> ctas;
    explicit Cluster(int threads) : bar(threads) {}
};
// a CUDA thread's own: kept by its fiber (Fibers::local)
inline Cta* cta = nullptr;
inline Cluster* cluster = nullptr;
inline int rank = 0;
inline std::optional<Barrier::arrival_token> cluster_token;
inline size_t dyn_smem = 0;   // the launch's dynamic shared memory (main's 11th argument)

template <typename T> T* shared(const char* name, size_t count)
{
    auto& a = cta->arena[name];
    if (a.empty()) {
        a.resize(count * sizeof(T) + 64);
        std::memset(a.data(), 0xff, a.size());   // garbage, as on the GPU
    }
    return reinterpret_cast<T*>(a.data());
}

inline void check_aligned(const void* p, size_t bytes)
{
    if (reinterpret_cast<uintptr_t>(p) % bytes != 0) {
        std::fprintf(stderr, "misaligned %zu-byte access at %p\n", bytes, p);
        std::abort();
    }
}
}  // namespace simt

inline simt_uint3 threadIdx, blockIdx;
inline simt_uint3 blockDim, gridDim;

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __cluster_dims__(...)
#define __restrict__ __restrict

using std::min;
using std::max;
inline float __expf(float x) { return expf(x); }
inline void __syncthreads() { simt::cta->bar.arrive_and_wait(); }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline float __shfl_xor_sync(unsigned, float v, int offset)
{
    const int lane = threadIdx.x % 32;
    const unsigned* buf = simt::publish(simt::cta->warps[threadIdx.x / 32], lane,
                                        __float_as_uint(v));
    return __uint_as_float(buf[lane ^ offset]);
}
template <typename T> inline T __ldg(const T* p) { simt::check_aligned(p, sizeof(T)); return *p; }
template <typename T> inline T __ldcs(const T* p) { simt::check_aligned(p, sizeof(T)); return *p; }
template <typename T> inline void __stcs(T* p, T v) { simt::check_aligned(p, sizeof(T)); *p = v; }
inline float __fdividef(float a, float b) { return a / b; }
// the vector-store PTX (the test removes the kernel's wrappers): an aligned store
template <typename T> inline void st_ptx(T* p, T v) { simt::check_aligned(p, sizeof(T)); *p = v; }

// ---- the cluster barrier in halves (the test removes the kernel's PTX wrappers) -----------
inline void cluster_arrive_relaxed() { simt::cluster_token.emplace(simt::cluster->bar.arrive()); }
inline void cluster_wait()
{
    simt::cluster->bar.wait(std::move(*simt::cluster_token));
    simt::cluster_token.reset();
}

// ---- a spread group's counter and partials in global memory (the test removes the kernel's
// PTX wrappers): the arrival an atomic add (release), the count an acquire load ------------
inline void __trap() { std::fprintf(stderr, "__trap()\n"); std::abort(); }
inline unsigned spread_arrive(unsigned* counter)
{
    return std::atomic_ref<unsigned>(*counter).fetch_add(1u, std::memory_order_release);
}
inline unsigned spread_arrivals(const unsigned* counter)
{
    return std::atomic_ref<unsigned>(*const_cast<unsigned*>(counter))
        .load(std::memory_order_acquire);
}
template <typename T> inline T spread_read(const T* part) { return *part; }
// a pipelined group's tagged slots: two 64-bit words a slot, each stored and loaded whole
template <typename M> inline void slot_put(unsigned long long* slot, M v, unsigned tag)
{
    const unsigned long long hi = (unsigned long long)tag << 32;
    std::atomic_ref<unsigned long long>(slot[0]).store(hi | __float_as_uint(v.m),
                                                       std::memory_order_relaxed);
    std::atomic_ref<unsigned long long>(slot[1]).store(hi | __float_as_uint(v.s),
                                                       std::memory_order_relaxed);
}
template <typename M> inline bool slot_get(const unsigned long long* slot, unsigned tag, M& v)
{
    auto* s = const_cast<unsigned long long*>(slot);
    const unsigned long long a = std::atomic_ref<unsigned long long>(s[0])
        .load(std::memory_order_relaxed);
    const unsigned long long b = std::atomic_ref<unsigned long long>(s[1])
        .load(std::memory_order_relaxed);
    v.m = __uint_as_float((unsigned)a);
    v.s = __uint_as_float((unsigned)b);
    return (unsigned)(a >> 32) == tag && (unsigned)(b >> 32) == tag;
}
inline void spread_stall(long long) { simt::yield(); }
inline long long clock64() { return 0; }

// ---- a thread's copies into shared memory (the staged row's cp.async): at once ------------
template <int V> inline void cp_async(float* dst, const float* src)
{
    simt::check_aligned(dst, 4 * V);
    simt::check_aligned(src, 4 * V);
    std::memcpy(dst, src, 4 * V);
}
inline void cp_async_wait_all() {}

// ---- bulk copies and mbarriers -------------------------------------------------------------
inline std::atomic<uint64_t>* simt_phase(uint64_t* bar)
{
    return reinterpret_cast<std::atomic<uint64_t>*>(bar);
}
inline void mbar_init(uint64_t* bar, unsigned) { new (bar) std::atomic<uint64_t>(0); }
inline void mbar_init_fence() {}
inline void fence_proxy_async() {}
inline unsigned dynamic_smem_bytes() { return (unsigned)simt::dyn_smem; }
inline void bulk_load(void* dst, const void* src, unsigned bytes, uint64_t* bar)
{
    simt::check_aligned(dst, 16);
    simt::check_aligned(src, 16);
    const char* base = simt::cta->arena.at("stage").data();
    if (bytes == 0 || bytes % 16 != 0 || (char*)dst < base ||
        (char*)dst + bytes > base + simt::dyn_smem) {
        std::fprintf(stderr, "bad bulk copy of %u bytes at stage + %td (dynamic smem %zu)\n",
                     bytes, (char*)dst - base, simt::dyn_smem);
        std::abort();
    }
    std::memcpy(dst, src, bytes);
    simt_phase(bar)->fetch_add(1, std::memory_order_release);
}
inline void mbar_arrive(uint64_t* bar) { simt_phase(bar)->fetch_add(1, std::memory_order_release); }
inline void mbar_wait(uint64_t* bar, unsigned parity)
{
    while ((simt_phase(bar)->load(std::memory_order_acquire) & 1) == parity)
        simt::yield();
}
