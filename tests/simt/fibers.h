// The CUDA threads that run together (a CTA, a cluster, a wave of CTAs) as fibers of the one
// host thread, for the launchers (main.cpp, gemm_main.cpp), which include this after simt.h:
// the kernel's translation unit sees only simt::yield.
#pragma once
#include <sys/mman.h>
#include <type_traits>
#include <ucontext.h>
#include <unistd.h>

namespace simt {
// spawn() a fiber a CUDA thread; run() resumes them in sweeps, forward then backward, each
// until it gives way (simt::yield) or returns, and returns once every one has returned. The
// variables registered with local() (threadIdx, the CTA, ...) are each fiber's own: copied out
// when it gives way and back when it resumes. A fiber's stack has an inaccessible page below
// it, so that an overflow faults as a thread's would.
class Fibers {
public:
    static constexpr size_t STACK_BYTES = 256 * 1024;
    Fibers() = default;
    Fibers(const Fibers&) = delete;
    Fibers& operator=(const Fibers&) = delete;
    ~Fibers()
    {
        for (Fiber& f : fibers_)
            if (f.map != nullptr) munmap(f.map, STACK_BYTES + page());
    }
    template <typename T> void local(T& v)
    {
        static_assert(std::is_trivially_copyable_v<T>);
        locals_.push_back({&v, sizeof(T)});
        bytes_ += sizeof(T);
    }
    void spawn(void (*fn)(void*), void* arg) { fibers_.push_back({fn, arg, this}); }
    void run()
    {
        for (Fiber& f : fibers_) {
            f.map = mmap(nullptr, STACK_BYTES + page(), PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (f.map == MAP_FAILED || mprotect(f.map, page(), PROT_NONE) != 0) {
                std::perror("a fiber's stack");
                std::abort();
            }
            f.saved.resize(bytes_);
            getcontext(&f.ctx);
            f.ctx.uc_stack.ss_sp = static_cast<char*>(f.map) + page();
            f.ctx.uc_stack.ss_size = STACK_BYTES;
            f.ctx.uc_link = &scheduler_;
            makecontext(&f.ctx, entry, 0);
        }
        size_t left = fibers_.size();
        for (bool forward = true; left > 0; forward = !forward)
            for (size_t k = 0; k < fibers_.size(); ++k) {
                Fiber& f = fibers_[forward ? k : fibers_.size() - 1 - k];
                if (f.done) continue;
                current_ = &f;
                swapcontext(&scheduler_, &f.ctx);
                if (f.done) --left;
            }
        current_ = nullptr;
    }
    // the running fiber gives way; when it is resumed, its local() variables are its own again
    static void yield()
    {
        Fiber* f = current_;
        if (f == nullptr) return;   // the launcher's own code, not a CUDA thread
        char* p = f->saved.data();
        for (const Local& l : f->owner->locals_) {
            std::memcpy(p, l.at, l.bytes);
            p += l.bytes;
        }
        swapcontext(&f->ctx, &f->owner->scheduler_);
        p = f->saved.data();
        for (const Local& l : f->owner->locals_) {
            std::memcpy(l.at, p, l.bytes);
            p += l.bytes;
        }
    }

private:
    struct Local { void* at; size_t bytes; };
    struct Fiber {
        void (*fn)(void*);
        void* arg;
        Fibers* owner;
        ucontext_t ctx{};
        void* map = nullptr;
        bool done = false;
        std::vector<char> saved;
    };
    static size_t page() { static const size_t p = (size_t)sysconf(_SC_PAGESIZE); return p; }
    static void entry()
    {
        Fiber* f = current_;
        f->fn(f->arg);
        f->done = true;   // then uc_link: back to run()
    }
    static inline Fiber* current_ = nullptr;
    std::vector<Local> locals_;
    size_t bytes_ = 0;
    std::vector<Fiber> fibers_;
    ucontext_t scheduler_{};
};
void yield() { Fibers::yield(); }

// what simt.h keeps a CUDA thread's own
inline void own_simt_locals(Fibers& fibers)
{
    fibers.local(threadIdx);
    fibers.local(blockIdx);
    fibers.local(cta);
    fibers.local(cluster);
    fibers.local(rank);
    fibers.local(cluster_token);
}
}  // namespace simt
