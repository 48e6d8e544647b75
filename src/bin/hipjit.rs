//! The `hipjit` command (placeholder).
fn main() {}
