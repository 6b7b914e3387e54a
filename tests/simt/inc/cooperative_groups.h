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
                std::lock_guard<std::mutex> g(other->lock);
                return reinterpret_cast<T*>(other->arena.at(name).data() + ((char*)p - base));
            }
        }
        std::fprintf(stderr, "map_shared_rank: %p is not shared memory\n", (void*)p);
        std::abort();
    }
};
inline cluster_group this_cluster() { return {}; }
}  // namespace cooperative_groups
