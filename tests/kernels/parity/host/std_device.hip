// Parity corpus, host programs: device code written with the C++ standard library's
// compile-time parts (fixed-width integers, type traits, numeric limits), no host code. hipRTC
// compiles against its own built-in headers, which the host's <type_traits> and <cstdint>
// redefine (hipRTC 6.4.3: "redefinition of 'integral_constant'").
#include <hip/hip_runtime.h>

#include <climits>
#include <cstdint>
#include <limits>
#include <type_traits>

template <typename T>
__global__ void clamp_to_max(T* x, std::uint32_t n) {
    static_assert(std::is_arithmetic<T>::value, "numbers only");
    const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    constexpr T top = std::numeric_limits<T>::max() / 2;
    if (i < n && x[i] > top) x[i] = top;
}
template __global__ void clamp_to_max<float>(float*, std::uint32_t);
template __global__ void clamp_to_max<std::int32_t>(std::int32_t*, std::uint32_t);

extern "C" __global__ void bit_width(const std::uint64_t* in, std::int32_t* out, std::uint32_t n) {
    const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] == 0 ? 0 : static_cast<std::int32_t>(sizeof(std::uint64_t) * CHAR_BIT) - __clzll(in[i]);
}
