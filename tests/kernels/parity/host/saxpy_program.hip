// Parity corpus, host programs: a whole program, as HIP's examples are written: standard
// headers, main, the HIP host API and a kernel launch. Only a process compiler compiles it.
#include <hip/hip_runtime.h>

#include <algorithm>
#include <iostream>
#include <vector>

extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

int main() {
    constexpr unsigned n = 1024;
    std::vector<float> x(n, 1.0f), y(n, 2.0f);
    float *dx = nullptr, *dy = nullptr;
    if (hipMalloc(&dx, n * sizeof(float)) != hipSuccess || hipMalloc(&dy, n * sizeof(float)) != hipSuccess) {
        std::cerr << "hipMalloc failed\n";
        return 1;
    }
    (void)hipMemcpy(dx, x.data(), n * sizeof(float), hipMemcpyHostToDevice);
    (void)hipMemcpy(dy, y.data(), n * sizeof(float), hipMemcpyHostToDevice);
    hipLaunchKernelGGL(saxpy, dim3(n / 256), dim3(256), 0, 0, 3.0f, dx, dy, n);
    (void)hipMemcpy(y.data(), dy, n * sizeof(float), hipMemcpyDeviceToHost);
    (void)hipFree(dx);
    (void)hipFree(dy);
    const bool ok = std::all_of(y.begin(), y.end(), [](float v) { return v == 5.0f; });
    std::cout << (ok ? "ok" : "wrong") << '\n';
    return ok ? 0 : 1;
}
