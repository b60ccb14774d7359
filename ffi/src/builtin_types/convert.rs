//! `__ffi_convert__` of the core object types (spec §3.2): a function `(value) -> T` that
//! returns `value` as an instance of the type, converting where the C++ `TryCastFromAnyView` of
//! the matching reference type would, or raises a TypeError
//! ``Cannot cast from `<source>` to `<target>` ``. The official Python package's type converter
//! calls it when a value does not already satisfy a field's or argument's schema (a Python list
//! for an `ffi.Shape` field, a List where an Array is expected, ...).
//!
//! What each type accepts:
//! - `ffi.Object` (nullable): None and every object.
//! - `ffi.Function`, `ffi.Tensor` (nullable): None and their instances.
//! - `ffi.Error`: its instances.
//! - `ffi.String`: the three string kinds; `ffi.Bytes`: the three byte kinds.
//! - `ffi.Array` / `ffi.List`: either sequence, copied into the target kind when it differs.
//! - `ffi.Map` / `ffi.Dict`: either mapping, copied likewise.
//! - `ffi.Shape`: a Shape, or an Array or List whose items are all int or bool.

use crate::abi::*;
use crate::any::{Any, AnyView};
use crate::array::{Array, ArrayObj};
use crate::error::{Error, Result};
use crate::function::Function;
use crate::list::{List, ListObj};
use crate::map::{Dict, DictObj, Map, MapObj};
use crate::reflection::object_arg;
use crate::shape::Shape;
use crate::type_table::{type_key_of, TypeSink};

/// The TypeError of a failed conversion; the source is named by the view's type index as the
/// official library does (so a short string reads `ffi.SmallStr`).
fn cast_error(v: &AnyView<'_>, target: &str) -> Error {
    let source = match v.as_object_ptr() {
        // SAFETY: object views point at live objects.
        Some(p) => type_key_of(unsafe { (*p).type_index }),
        None => type_key_of(v.type_index()),
    };
    Error::type_error(format!("Cannot cast from `{source}` to `{target}`"))
}

/// The value itself when it is None (and `nullable`) or an instance of `ti` (the check of the
/// reflection setters).
fn instance(v: &AnyView<'_>, ti: i32, nullable: bool) -> Option<Any> {
    let obj = object_arg(v, ti, nullable).ok()?;
    Some(obj.map_or_else(Any::default, Any::from))
}

fn sequence_items(v: &AnyView<'_>) -> Option<Vec<Any>> {
    if let Some(a) = v.as_object_of::<ArrayObj>() {
        return Some(a.to_vec());
    }
    v.as_object_of::<ListObj>().map(|l| l.to_vec())
}

fn mapping_pairs(v: &AnyView<'_>) -> Option<Vec<(Any, Any)>> {
    if let Some(m) = v.as_object_of::<MapObj>() {
        return Some(m.to_vec());
    }
    v.as_object_of::<DictObj>().map(|d| d.to_vec())
}

/// The conversion into type `ti`, `Ok(None)` when the value is not convertible.
fn convert(ti: i32, v: &AnyView<'_>) -> Result<Option<Any>> {
    Ok(match ti {
        kTVMFFIObject | kTVMFFIFunction | kTVMFFITensor => instance(v, ti, true),
        kTVMFFIStr => match v.type_index() {
            kTVMFFIRawStr | kTVMFFISmallStr | kTVMFFIStr => Some(v.to_owned()?),
            _ => None,
        },
        kTVMFFIBytes => match v.type_index() {
            kTVMFFIByteArrayPtr | kTVMFFISmallBytes | kTVMFFIBytes => Some(v.to_owned()?),
            _ => None,
        },
        kTVMFFIArray => match instance(v, ti, false) {
            Some(same) => Some(same),
            None => sequence_items(v).map(|items| Any::from(Array::from_vec(items))),
        },
        kTVMFFIList => match instance(v, ti, false) {
            Some(same) => Some(same),
            None => sequence_items(v).map(|items| Any::from(List::from_vec(items))),
        },
        kTVMFFIMap => match instance(v, ti, false) {
            Some(same) => Some(same),
            None => match mapping_pairs(v) {
                Some(pairs) => Some(Any::from(Map::from_pairs(pairs)?)),
                None => None,
            },
        },
        kTVMFFIDict => match instance(v, ti, false) {
            Some(same) => Some(same),
            None => match mapping_pairs(v) {
                Some(pairs) => Some(Any::from(Dict::from_pairs(pairs)?)),
                None => None,
            },
        },
        kTVMFFIShape => match instance(v, ti, false) {
            Some(same) => Some(same),
            None => sequence_items(v).and_then(|items| {
                let dims: Option<Vec<i64>> = items.iter().map(|x| x.as_view().as_i64()).collect();
                dims.map(|d| Any::from(Shape::new(&d)))
            }),
        },
        _ => instance(v, ti, false),
    })
}

/// The `__ffi_convert__` function of type `ti`; `target` names it in errors.
pub(crate) fn convert_function(ti: i32, target: &'static str) -> Function {
    Function::from_packed(move |args| match args {
        [v] => convert(ti, v)?.ok_or_else(|| cast_error(v, target)),
        _ => Err(Error::type_error(format!(
            "{}.__ffi_convert__: expected 1 argument, got {}",
            type_key_of(ti),
            args.len()
        ))),
    })
}

/// (type index, the name the official errors give the target), in the official order.
const CORE_TYPES: &[(i32, &str)] = &[
    (kTVMFFIObject, "ffi.Object"),
    (kTVMFFIStr, "str"),
    (kTVMFFIBytes, "bytes"),
    (kTVMFFIError, "ffi.Error"),
    (kTVMFFIFunction, "ffi.Function"),
    (kTVMFFIShape, "ffi.Shape"),
    (kTVMFFITensor, "ffi.Tensor"),
    (kTVMFFIArray, "Array<Any>"),
    (kTVMFFIMap, "Map<Any, Any>"),
    (kTVMFFIList, "List<Any>"),
    (kTVMFFIDict, "Dict<Any, Any>"),
];

pub(super) fn register(sink: &dyn TypeSink) -> Result<()> {
    for &(ti, target) in CORE_TYPES {
        let f = convert_function(ti, target);
        // SAFETY: a live Function value for the library's own column.
        unsafe { sink.register_attr(ti, "__ffi_convert__", Any::from(f).raw()) }?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::array_of;

    fn call(ti: i32, target: &'static str, v: &Any) -> Result<Any> {
        convert_function(ti, target).call(&[v.as_view()])
    }

    #[test]
    fn shape_from_sequences_of_integers() {
        let a = Any::from(array_of([1i64, 2, 3]));
        let s = call(kTVMFFIShape, "ffi.Shape", &a).unwrap();
        assert_eq!(s.type_index(), kTVMFFIShape);
        let s = s.get::<Shape>().unwrap();
        assert_eq!(s.as_slice(), &[1, 2, 3]);
        let l = Any::from(List::from_vec(vec![Any::from(4i64), Any::from(true)]));
        let s = call(kTVMFFIShape, "ffi.Shape", &l)
            .unwrap()
            .get::<Shape>()
            .unwrap();
        assert_eq!(s.as_slice(), &[4, 1]);
        // the same object comes back when no conversion is needed
        let same = call(kTVMFFIShape, "ffi.Shape", &s.clone().into()).unwrap();
        assert_eq!(same.get::<Shape>().unwrap().as_raw(), s.as_raw());
    }

    #[test]
    fn failures_name_source_and_target() {
        let bad = Any::from(Array::from_vec(vec![Any::from(1i64), Any::from("x")]));
        let e = call(kTVMFFIShape, "ffi.Shape", &bad).unwrap_err();
        assert_eq!(e.kind(), "TypeError");
        assert_eq!(e.message(), "Cannot cast from `ffi.Array` to `ffi.Shape`");
        let e = call(kTVMFFIArray, "Array<Any>", &Any::from(1i64)).unwrap_err();
        assert_eq!(e.message(), "Cannot cast from `int` to `Array<Any>`");
        let e = call(kTVMFFIError, "ffi.Error", &Any::default()).unwrap_err();
        assert_eq!(e.message(), "Cannot cast from `None` to `ffi.Error`");
        let e = convert_function(kTVMFFIArray, "Array<Any>")
            .call(&[])
            .unwrap_err();
        assert!(
            e.message().contains("expected 1 argument, got 0"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn sequences_and_mappings_convert_both_ways() {
        let l = Any::from(List::from_vec(vec![Any::from(1i64), Any::from("a")]));
        let a = call(kTVMFFIArray, "Array<Any>", &l).unwrap();
        assert_eq!(a.type_index(), kTVMFFIArray);
        assert_eq!(a.get::<Array>().unwrap().to_vec().len(), 2);
        let back = call(kTVMFFIList, "List<Any>", &a).unwrap();
        assert_eq!(back.type_index(), kTVMFFIList);
        let d = Dict::from_pairs([(Any::from("k"), Any::from(1i64))]).unwrap();
        let m = call(kTVMFFIMap, "Map<Any, Any>", &Any::from(d)).unwrap();
        assert_eq!(m.type_index(), kTVMFFIMap);
        let d2 = call(kTVMFFIDict, "Dict<Any, Any>", &m).unwrap();
        assert_eq!(d2.type_index(), kTVMFFIDict);
        assert_eq!(d2.get::<Dict>().unwrap().to_vec().len(), 1);
    }

    #[test]
    fn nullable_targets_accept_none() {
        for (ti, target) in [
            (kTVMFFIObject, "ffi.Object"),
            (kTVMFFIFunction, "ffi.Function"),
            (kTVMFFITensor, "ffi.Tensor"),
        ] {
            assert!(call(ti, target, &Any::default())
                .unwrap()
                .as_view()
                .is_none());
        }
        assert!(call(kTVMFFIObject, "ffi.Object", &Any::from(1i64)).is_err());
        let s = call(kTVMFFIStr, "str", &Any::from("hello world")).unwrap();
        assert_eq!(s.as_view().as_str(), Some("hello world"));
        assert!(call(kTVMFFIStr, "str", &Any::from(1.5f64)).is_err());
    }
}
