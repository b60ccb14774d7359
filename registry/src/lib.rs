//! anyffi-registry: the global function table, the built-in `ffi.*` functions, the environment
//! (streams, DLPack allocators, init-once handles, host C APIs) and their C symbols.
//!
//! Layering: this crate sits on `anyffi` (objects, values, the type table) and below
//! `anyffi-runtime` (devices, tensors, ops), which builds the shared library.
#![deny(unsafe_op_in_unsafe_fn)]
// `x % n != 0`, not `is_multiple_of` (Rust 1.87): the workspace's rust-version is 1.80.
#![allow(clippy::manual_is_multiple_of)]
#![allow(non_upper_case_globals)]

pub mod builtins;
pub mod capi;
mod cxx_abi;
mod cxx_api;
mod cxx_module;
pub mod env;
pub mod global;
pub mod module;

pub use global::{get_global, register_global, register_packed, register_typed, GlobalEntry};
