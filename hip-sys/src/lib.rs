//! Raw bindings to the HIP runtime API (placeholder: filled by the hip-sys work).
#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals)]

pub mod discovery;
