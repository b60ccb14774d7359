//! anyffi: the TVM FFI object system and stable C ABI (apache-tvm-ffi 0.1.x), in Rust.
//!
//! Layers, bottom up: `abi` (C layouts) → `object` (header, refcounts) → `any` (owned/borrowed
//! values) → one module per object type → `type_table` → `capi` (the exported C symbols, thin
//! shells over the safe code).
//!
//! Owned values ([`Any`]) release what they hold on drop; borrowed ones ([`AnyView`]) are what
//! functions receive. Arrays and Maps are immutable and shared (copy-on-write), Lists and Dicts
//! are shared mutable containers; a [`Function`] is callable from every binding.
//!
//! ```
//! use anyffi::{Any, AnyView, Array, Function, List, Map};
//!
//! let a = Array::from_vec(vec![Any::from(1i64), Any::from("two")]);
//! assert_eq!(a.get(1).unwrap().as_str(), Some("two"));
//!
//! let l = List::new();
//! l.push(Any::from(2.5f64));
//! let alias = l.clone(); // the same List
//! alias.push(Any::from(true));
//! assert_eq!(l.len(), 2);
//!
//! let mut m = Map::from_pairs([(Any::from("k"), Any::from(1i64))]).unwrap();
//! let before = m.clone();
//! m.insert(Any::from("k"), Any::from(2i64)).unwrap(); // copy-on-write: `before` keeps 1
//! assert_eq!(before.get_str("k").unwrap().unwrap().as_i64(), Some(1));
//!
//! let add = Function::from_typed("add", |x: i64, y: i64| x + y);
//! let r = add.call(&[AnyView::from(2i64), AnyView::from(3i64)]).unwrap();
//! assert_eq!(r.get::<i64>().unwrap(), 5);
//! let e = add.call(&[AnyView::from(2i64)]).unwrap_err();
//! assert_eq!(e.kind(), "TypeError");
//! ```
#![deny(unsafe_op_in_unsafe_fn)]
// `x % n != 0`, not `is_multiple_of` (Rust 1.87): the workspace's rust-version is 1.80.
#![allow(clippy::manual_is_multiple_of)]
// ABI constants keep their upstream C names (kTVMFFI*, kDL*) so they read like the header.
#![allow(non_upper_case_globals)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod abi;
pub mod any;
pub mod array;
pub mod backtrace;
pub mod bigint;
pub mod builtin_types;
pub mod capi;
pub mod dataclass;
pub mod device;
pub mod dtype;
pub mod error;
pub mod flat_map;
pub mod function;
pub mod hash;
pub mod json;
pub mod list;
pub mod map;
pub mod map_base;
pub mod object;
pub mod opaque;
pub mod reflection;
pub mod repr;
pub mod sentinel;
pub mod seq;
pub mod serialization;
pub mod shape;
pub mod string;
pub mod structural;
pub mod tensor;
pub mod type_table;

pub use any::{Any, AnyView, FromAny};
pub use array::{array_of, Array, ArrayObj};
pub use error::{Error, Result};
pub use function::{Function, FunctionObj, IntoAny, TypedFn};
pub use list::{List, ListObj};
pub use map::{Dict, DictObj, Map, MapObj};
pub use object::{make_object, Object, ObjectRef, ObjectType, WeakRef};
pub use shape::{Shape, ShapeObj};
pub use string::{Bytes, BytesObj, Str, StrObj};
pub use tensor::{DLTensorArg, Tensor, TensorObj};

/// An identity of the calling thread, unique among the threads alive, that allocates nothing.
/// (`std::thread::current()` allocates a handle on threads that Rust did not start, such as a C
/// program's main thread, and valgrind reports that handle as possibly lost at exit.)
pub(crate) fn thread_token() -> usize {
    thread_local!(static TOKEN: u8 = const { 0 });
    TOKEN.with(|t| t as *const u8 as usize)
}
