//! Re-emits hip-sys's API probe as cfg flags for the safe layer (placeholder).
fn main() {
    println!("cargo::rerun-if-changed=build.rs");
}
