#!/usr/bin/env bash
# Builds what scripts/h200.sh runs on the NVIDIA machine (which has no Rust): the stripped
# release binaries of examples/nvidia_e2e.rs, examples/nvidia_compilers.rs,
# examples/nvidia_graphs.rs, examples/nvidia_multi_gpu.rs and
# examples/downstream's softmax-demo, the cdylib of examples/torch_stream, and the Python
# package's release wheel (scripts/build-wheel.sh --release: hipjit-*.whl, installed there with
# pip --no-index --no-deps), into .device-bin/ (git-ignored; carry it to the machine).
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."
out=.device-bin
mkdir -p "$out"
cargo build --release --example nvidia_e2e --example nvidia_compilers --example nvidia_graphs \
    --example nvidia_multi_gpu
cp target/release/examples/nvidia_e2e target/release/examples/nvidia_compilers \
    target/release/examples/nvidia_graphs target/release/examples/nvidia_multi_gpu "$out/"
cargo build --release -p hipjit-softmax --bin softmax-demo
cp target/release/softmax-demo "$out/"
(cd examples/torch_stream && CARGO_TARGET_DIR=../../target/torch_stream cargo build --release)
cp target/torch_stream/release/libhipjit_torch_stream.so "$out/"
strip "$out/nvidia_e2e" "$out/nvidia_compilers" "$out/nvidia_graphs" "$out/nvidia_multi_gpu" "$out/softmax-demo" "$out/libhipjit_torch_stream.so"
bash scripts/build-wheel.sh --release "$out"
ls -l "$out"
