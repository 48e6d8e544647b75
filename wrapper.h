/* The header hip-sys's bindgen run parses: the HIP runtime API for the AMD platform. */
#include <hip/hip_runtime_api.h>
