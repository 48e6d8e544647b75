/*
 * The translation unit hip-sys's bindgen run parses: the HIP runtime API for the AMD platform.
 * hip-sys embeds this same line (hip-sys/build/run_bindgen.rs, WRAPPER) so that it builds on
 * its own; this copy reproduces the parse by hand with exactly hip-sys's arguments:
 *   clang++ -fsyntax-only -x c++ -D__HIP_PLATFORM_AMD__ -isystem <include dir> wrapper.h
 */
#include <hip/hip_runtime_api.h>
