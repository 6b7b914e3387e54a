// Runs a softmax library bundle from C++ through its generated header, and checks each answer
// against a CPU reference in double precision.
//
//   tuneforge library export --kernel softmax --out BUNDLE
//   nvcc -std=c++17 -O2 -I BUNDLE examples/library/softmax_demo.cu -o softmax_demo -lcuda
//   ./softmax_demo BUNDLE [ROWSxCOLS ...]
//
// Without shapes it runs every shape of the table with at most 2^26 elements. A shape with no
// entry is reported (the launcher answers CUDA_ERROR_NOT_FOUND: a program runs its own
// fallback there). Exit status 0 when every answer is within the family's tolerance.
#include <cuda.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "tuneforge_dispatch.h"

namespace {

constexpr double kTolerance = 1e-4;

bool ok(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return true;
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  std::fprintf(stderr, "%s failed: %s\n", what, name ? name : "?");
  return false;
}

// Largest |y - ref| / (ref + 1/n) over the matrix (the family's scaled rule), n the row length.
double scaled_error(const std::vector<float>& x, const std::vector<float>& y, long long rows,
                    long long cols) {
  double worst = 0.0;
  for (long long r = 0; r < rows; ++r) {
    const float* row = &x[r * cols];
    double top = -INFINITY;
    for (long long c = 0; c < cols; ++c) top = std::fmax(top, static_cast<double>(row[c]));
    double sum = 0.0;
    for (long long c = 0; c < cols; ++c) sum += std::exp(static_cast<double>(row[c]) - top);
    for (long long c = 0; c < cols; ++c) {
      const double ref = std::exp(static_cast<double>(row[c]) - top) / sum;
      const double got = y[r * cols + c];
      if (!std::isfinite(got)) return INFINITY;
      worst = std::fmax(worst, std::fabs(got - ref) / (ref + 1.0 / cols));
    }
  }
  return worst;
}

// 1: passed, 0: failed, -1: no entry at the shape.
int run(tuneforge_softmax::Library& lib, long long rows, long long cols, CUstream stream) {
  const long long dims[2] = {rows, cols};
  const size_t n = static_cast<size_t>(rows * cols);
  std::vector<float> x(n), y(n, NAN);
  std::mt19937 gen(static_cast<unsigned>(rows * 131 + cols));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& v : x) v = normal(gen);
  CUdeviceptr buffers[2] = {0, 0};
  if (!ok(cuMemAlloc(&buffers[0], n * sizeof(float)), "cuMemAlloc(x)") ||
      !ok(cuMemAlloc(&buffers[1], n * sizeof(float)), "cuMemAlloc(y)")) return 0;
  int verdict = 0;
  if (ok(cuMemcpyHtoD(buffers[0], x.data(), n * sizeof(float)), "cuMemcpyHtoD") &&
      ok(cuMemsetD32(buffers[1], 0x7FC0DEAD, n), "cuMemsetD32")) {
    const CUresult r = lib.launch(dims, buffers, stream);
    if (r == CUDA_ERROR_NOT_FOUND) {
      std::printf("%lldx%lld: no entry (%s): the program's fallback runs here\n", rows, cols,
                  lib.last_error().c_str());
      verdict = -1;
    } else if (r != CUDA_SUCCESS) {
      std::fprintf(stderr, "%lldx%lld: launch failed: %s\n", rows, cols,
                   lib.last_error().c_str());
    } else if (ok(cuStreamSynchronize(stream), "cuStreamSynchronize") &&
               ok(cuMemcpyDtoH(y.data(), buffers[1], n * sizeof(float)), "cuMemcpyDtoH")) {
      const double err = scaled_error(x, y, rows, cols);
      const tuneforge::Entry* entry = lib.find(dims);
      verdict = err <= kTolerance ? 1 : 0;
      std::printf("%lldx%lld: point %s, scaled error %.3g: %s\n", rows, cols,
                  tuneforge_softmax::kPoints[entry->point].id, err, verdict ? "ok" : "WRONG");
    }
  }
  cuMemFree(buffers[0]);
  cuMemFree(buffers[1]);
  return verdict;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s BUNDLE [ROWSxCOLS ...]\n", argv[0]);
    return 2;
  }
  CUdevice device;
  CUcontext context;
  CUstream stream;
  if (!ok(cuInit(0), "cuInit") || !ok(cuDeviceGet(&device, 0), "cuDeviceGet") ||
      !ok(cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain") ||
      !ok(cuCtxSetCurrent(context), "cuCtxSetCurrent") ||
      !ok(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate")) return 1;
  std::vector<std::pair<long long, long long>> shapes;
  for (int a = 2; a < argc; ++a) {
    long long rows = 0, cols = 0;
    if (std::sscanf(argv[a], "%lldx%lld", &rows, &cols) != 2 || rows < 1 || cols < 1) {
      std::fprintf(stderr, "shape %s: expected ROWSxCOLS\n", argv[a]);
      return 2;
    }
    shapes.emplace_back(rows, cols);
  }
  if (shapes.empty()) {
    for (int e = 0; e < tuneforge_softmax::kEntryCount; ++e) {
      const auto& d = tuneforge_softmax::kEntries[e].dims;
      if (d[0] * d[1] <= (1LL << 26)) shapes.emplace_back(d[0], d[1]);
    }
  }
  int failed = 0;
  {
    tuneforge_softmax::Library lib(argv[1]);
    std::printf("%s on %s (%s): %d shapes in the table\n", tuneforge_softmax::kFamily,
                tuneforge_softmax::kGpu, tuneforge_softmax::kArch,
                tuneforge_softmax::kEntryCount);
    for (const auto& s : shapes) failed += run(lib, s.first, s.second, stream) == 0;
  }
  cuStreamDestroy(stream);
  cuDevicePrimaryCtxRelease(device);
  std::printf("%s\n", failed ? "FAILED" : "all answers within the tolerance");
  return failed ? 1 : 0;
}
