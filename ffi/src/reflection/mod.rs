//! Reflection (c_api.h "Type reflection", spec §8 "Reflection and dataclasses"): field accessors
//! for `#[repr(C)]` Rust object types, a `TypeDef` builder, the walk over a type's fields with its
//! ancestors', field get/set/default through whatever getter or setter a type registered (ours,
//! C++ or Python), object creation, the reflection-generated `__ffi_init__` (KWARGS protocol),
//! `MakeObjectFromPackedArgs`, and the support for Python-defined classes.
//!
//! Rationale: everything here works on `TVMFFITypeInfo` alone, so a type registered by foreign
//! code (the official testing library, Python's `@py_class`) is created, initialised and printed
//! exactly like one of ours.

pub(crate) mod accessor;
mod def;
mod init;
mod pyclass;

pub(crate) use accessor::object_arg;
pub use accessor::{getter_for_static_type, write_field_value, Accessor};
pub use def::{creator, new_function, schema_metadata, DefaultObject, FieldDef, TypeDef};
pub use init::{create_empty_object, make_init, make_object_from_packed_args};
pub use pyclass::{make_field_setter, register_py_class_attrs, FConvert};

use std::ffi::c_void;
use std::sync::OnceLock;

use crate::abi::*;
use crate::any::Any;
use crate::error::{fetch_raised, Error, Result};
use crate::function::{call_raw, Function};
use crate::type_table;

/// A JSON string literal of `s`.
pub fn json_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// How this crate reaches the global function table, which lives in a crate above it.
pub type GlobalLookup = fn(&str) -> Option<Function>;

static GLOBAL_LOOKUP: OnceLock<GlobalLookup> = OnceLock::new();

/// Installs the global-function lookup (done once by the registry when its table is built).
pub fn set_global_lookup(f: GlobalLookup) {
    let _ = GLOBAL_LOOKUP.set(f);
}

/// The global function `name`, when a registry is present and has it.
pub fn global_function(name: &str) -> Option<Function> {
    GLOBAL_LOOKUP.get().and_then(|f| f(name))
}

/// Reads the field at `addr` through `getter` into an owned value (`FieldRef::get`, and the
/// structural walks' copies of a field's getter and offset).
///
/// # Safety
/// `addr` must be the address of a live object's field that `getter` reads.
#[inline]
pub(crate) unsafe fn read_field(
    getter: unsafe extern "C" fn(*mut c_void, *mut TVMFFIAny) -> std::ffi::c_int,
    addr: *mut c_void,
) -> Result<Any> {
    let mut out = Any::none();
    // SAFETY: per the caller; the result slot is owned and starts as None.
    if unsafe { getter(addr, out.as_out_ptr()) } != 0 {
        return Err(fetch_raised("field getter"));
    }
    Ok(out)
}

/// One field of a type, found again through its owner's stable `TVMFFITypeInfo` on each use
/// (the owner's field array can move when more fields are registered).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct FieldRef {
    owner: *const TVMFFITypeInfo,
    pos: usize,
}

// SAFETY: points into the never-freed type table.
unsafe impl Send for FieldRef {}
// SAFETY: as above.
unsafe impl Sync for FieldRef {}

impl FieldRef {
    /// The field description.
    pub fn info(&self) -> &TVMFFIFieldInfo {
        // SAFETY: type infos are never freed, and a registered field is never removed; a
        // buffer the table outgrew is kept, and `pos` is below a count published after it.
        unsafe {
            &*crate::type_table::published_ptr(std::ptr::addr_of!((*self.owner).fields))
                .add(self.pos)
        }
    }

    /// The field name.
    pub fn name(&self) -> &str {
        // SAFETY: field names are owned copies in the table.
        let b = unsafe { crate::error::bytes_of(&self.info().name) };
        std::str::from_utf8(b).unwrap_or("<non-UTF-8 name>")
    }

    /// The field flags.
    pub fn flags(&self) -> i64 {
        self.info().flags
    }

    fn addr(&self, obj: *mut TVMFFIObject) -> *mut c_void {
        // SAFETY: the offset lies inside objects of the owning type (and its descendants).
        unsafe { (obj as *mut u8).offset(self.info().offset as isize) as *mut c_void }
    }

    /// Reads the field of `obj` through its registered getter.
    ///
    /// # Safety
    /// `obj` must be a live object whose type has this field.
    pub unsafe fn get(&self, obj: *mut TVMFFIObject) -> Result<Any> {
        let Some(getter) = self.info().getter else {
            return Err(Error::runtime_error(format!(
                "field `{}` has no getter",
                self.name()
            )));
        };
        // SAFETY: the field of a live object, read by its own getter.
        unsafe { read_field(getter, self.addr(obj)) }
    }

    /// Writes `value` into the field of `obj` through its registered setter (a C function, or a
    /// Function called with the field address and the value).
    ///
    /// # Safety
    /// `obj` must be a live object whose type has this field; `value` a valid view.
    pub unsafe fn set(&self, obj: *mut TVMFFIObject, value: &TVMFFIAny) -> Result<()> {
        let info = self.info();
        let addr = self.addr(obj);
        if info.setter.is_null() {
            return Err(Error::runtime_error(format!(
                "field `{}` has no setter",
                self.name()
            )));
        }
        if info.flags & kTVMFFIFieldFlagBitSetterIsFunctionObj != 0 {
            let args = [Any::from(addr).into_raw(), *value];
            // SAFETY: the table retains the setter function; two valid argument views.
            unsafe { call_raw(info.setter as *mut TVMFFIObject, args.as_ptr(), 2) }?;
            return Ok(());
        }
        // SAFETY: without the flag, the setter is a `TVMFFIFieldSetter`.
        let setter: unsafe extern "C" fn(*mut c_void, *const TVMFFIAny) -> std::ffi::c_int =
            unsafe { std::mem::transmute(info.setter) };
        // SAFETY: the setter writes the field of a live object from a valid view.
        if unsafe { setter(addr, value) } != 0 {
            return Err(fetch_raised("field setter"));
        }
        Ok(())
    }

    /// Sets the field to its default (calling the factory when the default is one).
    ///
    /// # Safety
    /// As for [`FieldRef::set`].
    pub unsafe fn set_default(&self, obj: *mut TVMFFIObject) -> Result<()> {
        let info = self.info();
        if info.flags & kTVMFFIFieldFlagBitMaskDefaultFromFactory != 0 {
            let factory = info.default_value_or_factory;
            if factory.type_index != kTVMFFIFunction {
                return Err(Error::type_error(format!(
                    "the default factory of field `{}` is not an ffi.Function",
                    self.name()
                )));
            }
            // SAFETY: the table keeps the factory alive; called with no arguments.
            let v = unsafe { call_raw(factory.value.v_obj, std::ptr::null(), 0) }?;
            // SAFETY: per the caller.
            return unsafe { self.set(obj, v.raw()) };
        }
        // SAFETY: the table owns the default value; per the caller for `obj`.
        unsafe { self.set(obj, &info.default_value_or_factory) }
    }
}

/// The type information of `index`, or a ValueError.
pub fn type_info(index: i32) -> Result<&'static TVMFFITypeInfo> {
    type_table::type_entry(index)
        .map(|e| &e.info)
        .ok_or_else(|| Error::value_error(format!("unknown type index {index}")))
}

/// The key of a type information record.
pub fn type_key(info: &TVMFFITypeInfo) -> &str {
    // SAFETY: keys are owned by the table.
    let b = unsafe { crate::error::bytes_of(&info.type_key) };
    std::str::from_utf8(b).unwrap_or("<non-UTF-8 key>")
}

/// Every field of a type: its ancestors' (root excluded, parents first), then its own.
pub fn all_fields(info: &TVMFFITypeInfo) -> Vec<FieldRef> {
    fields(info).collect()
}

/// The fields `all_fields` lists, without making the list (a Python-class object's deleter and
/// shallow copy allocated one per object): the count is read first, so that a field registered
/// while the caller iterates is not seen, as with the list.
pub fn fields(info: &TVMFFITypeInfo) -> impl Iterator<Item = FieldRef> {
    let mut cursor = FieldCursor::new(info);
    let n = {
        let mut c = cursor;
        std::iter::from_fn(move || c.next_field()).count()
    };
    std::iter::from_fn(move || cursor.next_field()).take(n)
}

/// The fields `all_fields` lists, read one at a time from the type table (no list is made, and
/// a field registered meanwhile is seen, as the official walks see it).
#[derive(Clone, Copy)]
pub struct FieldCursor {
    info: *const TVMFFITypeInfo,
    /// The owner being read: an ancestor's depth, or `type_depth` for the type itself.
    depth: usize,
    pos: usize,
}

impl FieldCursor {
    pub fn new(info: &TVMFFITypeInfo) -> FieldCursor {
        FieldCursor {
            info,
            // (the root, `ffi.Object` at depth 0, has no fields; a root type starts at itself)
            depth: (info.type_depth.max(0) as usize).min(1),
            pos: 0,
        }
    }

    /// The next field, or `None` after the type's own last one.
    pub fn next_field(&mut self) -> Option<FieldRef> {
        // SAFETY: type infos are never freed; `type_ancestors` has `type_depth` entries.
        unsafe {
            let own = (*self.info).type_depth.max(0) as usize;
            loop {
                let owner = match self.depth.cmp(&own) {
                    std::cmp::Ordering::Less => *(*self.info).type_ancestors.add(self.depth),
                    std::cmp::Ordering::Equal => self.info,
                    std::cmp::Ordering::Greater => return None,
                };
                let n = crate::type_table::published_count(std::ptr::addr_of!((*owner).num_fields));
                if (self.pos as i64) < n as i64 {
                    self.pos += 1;
                    return Some(FieldRef {
                        owner,
                        pos: self.pos - 1,
                    });
                }
                self.depth += 1;
                self.pos = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::any::AnyView;
    use crate::object::{new_object, ObjectRef, ObjectType};
    use crate::type_table::{get_or_alloc_index, GlobalTypes};
    use std::sync::OnceLock;

    /// A Rust type registered through `TypeDef`: `a: int`, `b: int = 5` (kw-only), `s: str`.
    #[repr(C)]
    struct Point {
        header: TVMFFIObject,
        a: i64,
        b: i64,
        s: Any,
    }

    static POINT: OnceLock<i32> = OnceLock::new();

    // SAFETY: repr(C), header first; the index is allocated once below.
    unsafe impl ObjectType for Point {
        const TYPE_KEY: &'static str = "reflection_test.Point";
        fn type_index() -> i32 {
            *POINT.get().expect("registered")
        }
    }

    impl DefaultObject for Point {
        fn default_object() -> ObjectRef<Self> {
            new_object(Point {
                header: TVMFFIObject::new::<Point>(),
                a: 0,
                b: 0,
                s: Any::from(""),
            })
        }
    }

    fn point() -> i32 {
        static REGISTER: std::sync::Once = std::sync::Once::new();
        let ti = *POINT.get_or_init(|| {
            get_or_alloc_index(Point::TYPE_KEY, -1, 1, 0, true, kTVMFFIObject).unwrap()
        });
        REGISTER.call_once(|| {
            let int = r#"{"type":"int"}"#;
            // SAFETY: `Point`'s layout: the header, then `a` at 24.
            unsafe { TypeDef::new(&GlobalTypes, ti, Point::TYPE_KEY) }
                .metadata(std::mem::size_of::<Point>(), 0, Some(creator::<Point>))
                .unwrap()
                .field(FieldDef::new("a", 24, Accessor::I64, int))
                .unwrap()
                .field(
                    FieldDef::new("b", 32, Accessor::I64, int)
                        .flags(kTVMFFIFieldFlagBitMaskKwOnly)
                        .default_value(Any::from(5i64)),
                )
                .unwrap()
                .field(FieldDef::new(
                    "s",
                    40,
                    Accessor::STR,
                    r#"{"type":"ffi.String"}"#,
                ))
                .unwrap();
        });
        ti
    }

    #[test]
    fn generated_init_binds_positional_and_keywords() {
        let ti = point();
        let init = make_init(ti).unwrap();
        let kw = crate::sentinel::kwargs();
        let s = Any::from("a long string value");
        let b = Any::from("b");
        let obj = init
            .call(&[
                AnyView::from(1i64),
                s.as_view(),
                AnyView::from(&kw),
                b.as_view(),
                AnyView::from(9i64),
            ])
            .unwrap();
        let p = obj.as_view().as_object_of::<Point>().unwrap();
        assert_eq!((p.a, p.b), (1, 9));
        assert_eq!(p.s.get::<String>().unwrap(), "a long string value");
        let e = init.call(&[AnyView::from(1i64)]).unwrap_err();
        assert_eq!(
            e.message(),
            "reflection_test.Point.__ffi_init__() missing required argument: 's'"
        );
        let e = init
            .call(&[AnyView::from(1i64), AnyView::from(2i64)])
            .unwrap_err();
        assert!(
            e.message()
                .contains("field 's':\n  Cannot convert from type `int`"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn packed_args_creation_and_errors() {
        point();
        let key = Any::from("reflection_test.Point");
        let (ks, v, ka) = (Any::from("s"), Any::from("v"), Any::from("a"));
        let args = [
            key.as_view(),
            ks.as_view(),
            v.as_view(),
            ka.as_view(),
            AnyView::from(3i64),
        ];
        let obj = make_object_from_packed_args(&args).unwrap();
        let p = obj.as_view().as_object_of::<Point>().unwrap();
        assert_eq!((p.a, p.b), (3, 5));
        let e = make_object_from_packed_args(&args[..3]).unwrap_err();
        assert_eq!(
            e.message(),
            "Required field `a` not set in type `reflection_test.Point`"
        );
        assert_eq!(e.kind(), "TypeError");
        let zz = Any::from("zz");
        let bad = [key.as_view(), zz.as_view(), AnyView::from(1i64)];
        assert!(make_object_from_packed_args(&bad).is_err());
    }

    #[test]
    fn accessors_convert_and_reject() {
        let mut slot = 0i64;
        let v = Any::from(true);
        let set = Accessor::I64.setter.unwrap();
        // SAFETY: a valid i64 field and value.
        assert_eq!(unsafe { set(&mut slot as *mut i64 as *mut _, v.raw()) }, 0);
        assert_eq!(slot, 1);
        let s = Any::from("text");
        // SAFETY: as above; the setter reports the mismatch.
        assert_eq!(unsafe { set(&mut slot as *mut i64 as *mut _, s.raw()) }, -1);
        assert_eq!(crate::error::take_raised().unwrap().kind(), "TypeError");
        assert!(getter_for_static_type(kTVMFFIRawStr).is_err());
    }
}
