//! The built-in global functions, one file per family; `register_all` is the one list.

mod basic;
mod containers;
mod dataclass;
mod json;
mod module;
mod reflection;
mod registry;
mod serialization;
mod structural;
mod testing;

use crate::global::Registrar;

/// Registers every built-in function into a table under construction.
pub fn register_all(r: &mut Registrar<'_>) {
    registry::register(r);
    basic::register(r);
    containers::register(r);
    json::register(r);
    structural::register(r);
    serialization::register(r);
    module::register(r);
    reflection::register(r);
    dataclass::register(r);
    testing::register(r);
}
