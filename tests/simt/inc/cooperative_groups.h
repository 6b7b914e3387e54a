// The cluster part of cooperative_groups for tests/simt/simt.h.
#pragma once
namespace cooperative_groups {
struct cluster_group {
    void sync() { simt::cluster->bar.arrive_and_wait(); }
    unsigned block_rank() const { return (unsigned)simt::rank; }
    template <typename T> T* map_shared_rank(T* p, int r) const
    {
        for (auto& [name, a] : simt::cta->arena) {
            char* base = a.data();
            if ((char*)p >= base && (char*)p < base + a.size()) {
                simt::Cta* other = simt::cluster->ctas[r];
                return reinterpret_cast<T*>(other->arena.at(name).data() + ((char*)p - base));
            }
        }
        std::fprintf(stderr, "map_shared_rank: %p is not shared memory\n", (void*)p);
        std::abort();
    }
};
inline cluster_group this_cluster() { return {}; }
}  // namespace cooperative_groups

// ---- a cluster's pushed partials (the test removes the kernel's cluster-push PTX) ----------
// An mbarrier's 8 bytes hold its arrivals (bits 0-15), the arrivals a phase expects (16-31:
// the CTA's own arm and each other CTA's push) and the phases completed (32-63).
inline void cl_bar_init(uint64_t* bar, unsigned expected)
{
    new (bar) std::atomic<uint64_t>((uint64_t)expected << 16);
}
inline void simt_cl_arrive(uint64_t* bar)
{
    auto* a = reinterpret_cast<std::atomic<uint64_t>*>(bar);
    uint64_t old = a->load(std::memory_order_relaxed), next;
    do {
        const uint64_t arrivals = (old & 0xffff) + 1, expected = (old >> 16) & 0xffff;
        next = arrivals == expected ? (((old >> 32) + 1) << 32) | (expected << 16)
                                    : (old & ~0xffffull) | arrivals;
    } while (!a->compare_exchange_weak(old, next, std::memory_order_acq_rel));
}
inline void cl_arm(uint64_t* bar) { simt_cl_arrive(bar); }
template <typename T> inline void cl_push(T* slot, T v, uint64_t* bar, unsigned rank)
{
    cooperative_groups::cluster_group c;
    *c.map_shared_rank(slot, (int)rank) = v;
    simt_cl_arrive(c.map_shared_rank(bar, (int)rank));
}
inline void cl_wait(uint64_t* bar, unsigned parity)
{
    auto* a = reinterpret_cast<std::atomic<uint64_t>*>(bar);
    while (((a->load(std::memory_order_acquire) >> 32) & 1) == parity) simt::yield();
}
