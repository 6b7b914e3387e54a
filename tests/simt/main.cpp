// Runs the rendered kernel on the host: main ROWS COLS XOFF YOFF GRID BLOCK CLUSTER IN OUT [SMEM]
// (x read from IN at XOFF floats past a 64-byte boundary, y poisoned with NaN at YOFF, written
// to OUT; SMEM: the launch's dynamic shared memory in bytes, default 0). Clusters run one
// after another, the CTAs of one cluster together (CLUSTER: a spread point's group), each of
// their threads a fiber (fibers.h). Built with -DREFERENCE it runs the float64 reference
// instead and writes ref, then scale.
#include "fibers.h"
#ifdef REFERENCE
extern "C" void reference_softmax(const float* x, double* ref, double* scale, int rows,
                                  int cols);
#else
extern "C" void softmax(const float* x, float* y, int rows, int cols);
#endif

struct Job { int block, cta, rank; simt::Cta* c; simt::Cluster* cl; int tid;
             const float* x; float* y; double* ref; double* scale; int rows, cols; };

static void run(void* arg)
{
    Job* j = static_cast<Job*>(arg);
    threadIdx = {(unsigned)j->tid, 0, 0};
    blockIdx = {(unsigned)j->cta, 0, 0};
    simt::cta = j->c;
    simt::cluster = j->cl;
    simt::rank = j->rank;
#ifdef REFERENCE
    reference_softmax(j->x, j->ref, j->scale, j->rows, j->cols);
#else
    softmax(j->x, j->y, j->rows, j->cols);
#endif
}

int main(int argc, char** argv)
{
    if (argc != 10 && argc != 11) return 2;
    if (argc == 11) simt::dyn_smem = (size_t)atoll(argv[10]);
    const int rows = atoi(argv[1]), cols = atoi(argv[2]), xoff = atoi(argv[3]),
              yoff = atoi(argv[4]), grid = atoi(argv[5]), block = atoi(argv[6]),
              cl = atoi(argv[7]);
    const size_t n = (size_t)rows * cols;
    float* xb = static_cast<float*>(aligned_alloc(64, (n + 64) * 4));
    float* yb = static_cast<float*>(aligned_alloc(64, (n + 64) * 4));
    float* x = xb + xoff;
    float* y = yb + yoff;
    FILE* f = fopen(argv[8], "rb");
    if (!f || fread(x, 4, n, f) != n) return 3;
    fclose(f);
    for (size_t i = 0; i < n + 64 - yoff; ++i) y[i] = NAN;
    std::vector<double> ref(n, NAN), scale(n, NAN);
    gridDim = {(unsigned)grid, 1, 1};
    blockDim = {(unsigned)block, 1, 1};
    for (int c0 = 0; c0 < grid; c0 += cl) {
        simt::Cluster cluster(cl * block);
        std::vector<Job> jobs(cl * block);
        simt::Fibers fibers;
        simt::own_simt_locals(fibers);
        for (int r = 0; r < cl; ++r) cluster.ctas.push_back(new simt::Cta(block));
        for (int t = 0; t < cl * block; ++t) {
            jobs[t] = {block, c0 + t / block, t / block, cluster.ctas[t / block], &cluster,
                       t % block, x, y, ref.data(), scale.data(), rows, cols};
            fibers.spawn(run, &jobs[t]);
        }
        fibers.run();
        for (auto* c : cluster.ctas) delete c;
    }
    f = fopen(argv[9], "wb");
#ifdef REFERENCE
    fwrite(ref.data(), 8, n, f);
    fwrite(scale.data(), 8, n, f);
#else
    fwrite(y, 4, n, f);
#endif
    fclose(f);
    // nothing past the output may be written
    for (size_t i = n; i < n + 64 - yoff; ++i) if (!std::isnan(y[i])) return 5;
    return 0;
}
