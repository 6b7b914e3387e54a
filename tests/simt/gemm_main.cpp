// Runs a rendered bf16 GEMM kernel of the split workspace on the host (gemm.h):
//   gemm M N K GX GY BX BY SMEM PROLOGUE PGRID WS_BYTES IN OUT TOGETHER EGRID
// (exit 7: a kernel wrote past the end of C or of the workspace)
// IN holds A (M x K), B (K x N) and bias (N) as float32; OUT gets C (M x N). PROLOGUE is the
// kernel launched first on the workspace ("pass": the split pass, "reset": the on-demand
// split's counters) with PGRID CTAs of 256 threads, one after another; then the GEMM's GX x GY
// CTAs of BX x BY threads with SMEM bytes of dynamic shared memory, TOGETHER of them at once
// (1: one after another; more: CTAs that share blocks claim and wait on each other's slices
// as on the GPU); then, where EGRID is not 0, the stream-K fix-up's EGRID CTAs of 256 threads
// (its parts: the GEMM's GX CTAs a row). The workspace and C start as garbage (0xff bytes:
// NaN), as on the GPU. Every thread of the CTAs that run together is a fiber (fibers.h).
#include "fibers.h"

extern "C" void gemm_bias_relu(const float* A, const float* B, const float* bias, float* C,
                               int M, int N, int K, unsigned char* W);
extern "C" __attribute__((weak)) void gemm_bias_relu_split_pass(const float* A, const float* B,
                                                                unsigned char* W, int M, int N,
                                                                int K);
extern "C" __attribute__((weak)) void gemm_bias_relu_split_reset(unsigned char* W, int M,
                                                                 int N, int K);
extern "C" __attribute__((weak)) void gemm_bias_relu_sk_fixup(const unsigned char* W,
                                                              const float* bias, float* C,
                                                              int M, int N, int K, int splits);

// bytes past C and past the workspace (the launch's size) that are checked untouched
static constexpr size_t GUARD = 4096;
static constexpr unsigned char GUARD_BYTE = 0xa5;

struct Job { unsigned tx, ty, cx, cy; simt::Cta* s; gemm::Cta* g; int which; };
struct Args { const float *A, *B, *bias; float* C; unsigned char* W; int M, N, K, parts; };
static Args args;

static void run(void* arg)
{
    Job* j = static_cast<Job*>(arg);
    threadIdx = {j->tx, j->ty, 0};
    blockIdx = {j->cx, j->cy, 0};
    simt::cta = j->s;
    gemm::cta = j->g;
    if (j->which == 0)
        gemm_bias_relu(args.A, args.B, args.bias, args.C, args.M, args.N, args.K, args.W);
    else if (j->which == 1)
        gemm_bias_relu_split_pass(args.A, args.B, args.W, args.M, args.N, args.K);
    else if (j->which == 2)
        gemm_bias_relu_split_reset(args.W, args.M, args.N, args.K);
    else
        gemm_bias_relu_sk_fixup(args.W, args.bias, args.C, args.M, args.N, args.K, args.parts);
}

// a grid's CTAs, each one's threads together: `together` CTAs at a time (every CTA of a
// wave running at once, as on the GPU), in the grid's order
static int launch(int which, unsigned gx, unsigned gy, unsigned bx, unsigned by, size_t smem,
                  unsigned together)
{
    gridDim = {gx, gy, 1};
    blockDim = {bx, by, 1};
    const int threads = (int)(bx * by);
    const unsigned ctas = gx * gy;
    for (unsigned c0 = 0; c0 < ctas; c0 += together) {
        const unsigned n = std::min(together, ctas - c0);
        std::vector<simt::Cta*> s;
        std::vector<gemm::Cta*> g;
        std::vector<Job> jobs(n * threads);
        simt::Fibers fibers;
        simt::own_simt_locals(fibers);
        fibers.local(gemm::cta);
        for (unsigned i = 0; i < n; ++i) {
            s.push_back(new simt::Cta(threads));
            g.push_back(new gemm::Cta(threads, smem));
        }
        for (unsigned i = 0; i < n * threads; ++i) {
            const unsigned c = c0 + i / threads, t = i % threads;
            jobs[i] = {t % bx, t / bx, c % gx, c / gx, s[i / threads], g[i / threads], which};
            fibers.spawn(run, &jobs[i]);
        }
        fibers.run();
        for (unsigned i = 0; i < n; ++i) { delete s[i]; delete g[i]; }
    }
    return 0;
}

int main(int argc, char** argv)
{
    if (argc != 16) return 2;
    const int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]);
    const unsigned gx = atoi(argv[4]), gy = atoi(argv[5]), bx = atoi(argv[6]), by = atoi(argv[7]);
    const size_t smem = (size_t)atoll(argv[8]);
    const std::string prologue = argv[9];
    const unsigned pgrid = atoi(argv[10]);
    const size_t ws = (size_t)atoll(argv[11]);
    const unsigned together = (unsigned)atoi(argv[14]);
    const unsigned egrid = (unsigned)atoi(argv[15]);
    const size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    float* in = static_cast<float*>(aligned_alloc(64, ((na + nb + N) * 4 + 63) / 64 * 64));
    // C and the workspace with GUARD bytes after them that no kernel may write
    float* C = static_cast<float*>(aligned_alloc(64, (nc * 4 + GUARD + 63) / 64 * 64));
    unsigned char* W = static_cast<unsigned char*>(aligned_alloc(256,
                                                                 (ws + GUARD + 255) / 256 * 256));
    FILE* f = fopen(argv[12], "rb");
    if (!f || fread(in, 4, na + nb + N, f) != na + nb + N) return 3;
    fclose(f);
    std::memset(C, 0xff, nc * 4);
    std::memset(W, 0xff, ws);
    unsigned char* const c_end = reinterpret_cast<unsigned char*>(C) + nc * 4;
    std::memset(c_end, GUARD_BYTE, GUARD);
    std::memset(W + ws, GUARD_BYTE, GUARD);
    args = {in, in + na, in + na + nb, C, W, M, N, K, (int)gx};
    int rc = 0;
    if (prologue == "pass") {
        if (!gemm_bias_relu_split_pass) return 6;
        rc = launch(1, pgrid, 1, 256, 1, 0, 1);
    } else if (prologue == "reset") {
        if (!gemm_bias_relu_split_reset) return 6;
        rc = launch(2, pgrid, 1, 256, 1, 0, 1);
    }
    if (rc == 0) rc = launch(0, gx, gy, bx, by, smem, together);
    if (rc == 0 && egrid > 0) {
        if (!gemm_bias_relu_sk_fixup) return 6;
        rc = launch(3, egrid, 1, 256, 1, 0, 1);
    }
    if (rc != 0) return rc;
    f = fopen(argv[13], "wb");
    fwrite(C, 4, nc, f);
    for (size_t i = 0; i < GUARD; ++i)
        if (c_end[i] != GUARD_BYTE || W[ws + i] != GUARD_BYTE) return 7;  // written past the end
    fclose(f);
    return 0;
}
