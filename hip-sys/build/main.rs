//! hip-sys build script (placeholder).
fn main() {
    println!("cargo::rerun-if-changed=build");
}
