//! `ffi.reflection.AccessStep` (132) and `ffi.reflection.AccessPath` (133): a path from a root
//! value through attributes, array items and map items (C++ `reflection/access_path.h`), with the
//! methods Python calls (`_root`, `_extend`, `_attr`, ...) and the `__ffi_repr__` hooks that
//! print `<root>.a[0]["k"]`.
//!
//! Rationale: a path is an immutable linked list from the leaf to the root (`parent`, `step`,
//! `depth`), so extending shares the prefix and comparison walks both lists from the leaves.

use std::mem::offset_of;

use crate::abi::*;
use crate::any::{Any, AnyView};
use crate::array::Array;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::{new_object, Object, ObjectRef, ObjectType};
use crate::reflection::{creator, Accessor, DefaultObject, FieldDef, TypeDef};
use crate::type_table::TypeSink;

use super::{ACCESS_PATH_INDEX, ACCESS_STEP_INDEX};

/// `AccessKind`: what one step selects.
pub mod kind {
    pub const ATTR: i32 = 0;
    pub const ARRAY_ITEM: i32 = 1;
    pub const MAP_ITEM: i32 = 2;
    pub const ATTR_MISSING: i32 = 3;
    pub const ARRAY_ITEM_MISSING: i32 = 4;
    pub const MAP_ITEM_MISSING: i32 = 5;
}

/// Payload of `ffi.reflection.AccessStep`.
#[repr(C)]
pub struct AccessStepObj {
    pub header: TVMFFIObject,
    /// One of [`kind`].
    pub kind: i32,
    /// The attribute name, array index or map key.
    pub key: Any,
}

// SAFETY: repr(C), header first; a final type with a fixed index.
unsafe impl ObjectType for AccessStepObj {
    const TYPE_KEY: &'static str = "ffi.reflection.AccessStep";
    fn type_index() -> i32 {
        ACCESS_STEP_INDEX
    }
    fn is_instance(type_index: i32) -> bool {
        type_index == ACCESS_STEP_INDEX
    }
}

impl DefaultObject for AccessStepObj {
    fn default_object() -> ObjectRef<Self> {
        AccessStepObj::new(kind::ATTR, Any::none())
    }
}

impl AccessStepObj {
    /// A new step.
    pub fn new(kind: i32, key: Any) -> ObjectRef<AccessStepObj> {
        new_object(AccessStepObj {
            header: TVMFFIObject::new::<Self>(),
            kind,
            key,
        })
    }

    /// Same kind and `AnyEqual` keys.
    pub fn step_equal(&self, other: &AccessStepObj) -> Result<bool> {
        // SAFETY: the values are stored in, or borrowed from, live objects.
        Ok(self.kind == other.kind
            && unsafe { crate::hash::any_equal(self.key.raw(), other.key.raw()) }?)
    }
}

/// Payload of `ffi.reflection.AccessPath`.
#[repr(C)]
pub struct AccessPathObj {
    pub header: TVMFFIObject,
    /// The path without its last step (None at the root).
    pub parent: Option<ObjectRef<Object>>,
    /// The last step (None at the root).
    pub step: Option<ObjectRef<AccessStepObj>>,
    /// Number of steps.
    pub depth: i32,
}

// SAFETY: repr(C), header first; a final type with a fixed index.
unsafe impl ObjectType for AccessPathObj {
    const TYPE_KEY: &'static str = "ffi.reflection.AccessPath";
    fn type_index() -> i32 {
        ACCESS_PATH_INDEX
    }
    fn is_instance(type_index: i32) -> bool {
        type_index == ACCESS_PATH_INDEX
    }
}

impl DefaultObject for AccessPathObj {
    fn default_object() -> ObjectRef<Self> {
        AccessPathObj::root()
    }
}

/// Owning handle to an access path.
pub type AccessPath = ObjectRef<AccessPathObj>;

impl AccessPathObj {
    /// The empty path.
    pub fn root() -> AccessPath {
        new_object(AccessPathObj {
            header: TVMFFIObject::new::<Self>(),
            parent: None,
            step: None,
            depth: 0,
        })
    }

    /// The parent path, when it is one (it always is, for paths built here).
    fn parent_path(&self) -> Result<Option<AccessPath>> {
        match &self.parent {
            None => Ok(None),
            Some(p) => p
                .clone()
                .downcast::<AccessPathObj>()
                .map(Some)
                .map_err(|p| {
                    Error::type_error(format!(
                        "AccessPath.parent must be an ffi.reflection.AccessPath, got {}",
                        p.type_key()
                    ))
                }),
        }
    }

    /// The steps from the root to this path.
    pub fn to_steps(&self) -> Result<Vec<ObjectRef<AccessStepObj>>> {
        let mut rev = Vec::new();
        let mut cur_step = self.step.clone();
        let mut cur_parent = self.parent_path()?;
        while let Some(parent) = cur_parent {
            let step = cur_step
                .ok_or_else(|| Error::value_error("AccessPath: a non-root path without a step"))?;
            rev.push(step);
            cur_step = parent.step.clone();
            cur_parent = parent.parent_path()?;
        }
        rev.reverse();
        Ok(rev)
    }
}

/// `this.Extend(step)`.
pub fn extend(this: &AccessPath, step: ObjectRef<AccessStepObj>) -> AccessPath {
    new_object(AccessPathObj {
        header: TVMFFIObject::new::<AccessPathObj>(),
        parent: Some(this.clone().upcast()),
        step: Some(step),
        depth: this.depth + 1,
    })
}

/// Whether two paths have equal steps (compared from the leaves; shared prefixes stop early).
pub fn path_equal(lhs: &AccessPath, rhs: &AccessPath) -> Result<bool> {
    let (mut l, mut r) = (lhs.clone(), rhs.clone());
    if l.depth != r.depth {
        return Ok(false);
    }
    loop {
        if l.same_as(&r) {
            return Ok(true);
        }
        let (Some(lp), Some(rp)) = (l.parent_path()?, r.parent_path()?) else {
            return Ok(l.parent.is_none() && r.parent.is_none());
        };
        match (&l.step, &r.step) {
            (Some(a), Some(b)) if a.step_equal(b)? => {}
            (Some(_), Some(_)) => return Ok(false),
            _ => {
                return Err(Error::value_error(
                    "AccessPath: a non-root path without a step",
                ))
            }
        }
        l = lp;
        r = rp;
    }
}

/// Whether `this` is a prefix of `other` (or equal to it).
pub fn is_prefix_of(this: &AccessPath, other: &AccessPath) -> Result<bool> {
    if this.depth > other.depth {
        return Ok(false);
    }
    let mut cur = other.clone();
    while cur.depth > this.depth {
        cur = cur
            .parent_path()?
            .ok_or_else(|| Error::value_error("AccessPath: depth exceeds the number of steps"))?;
    }
    path_equal(this, &cur)
}

fn copy_step(src: &ObjectRef<AccessStepObj>) -> ObjectRef<AccessStepObj> {
    AccessStepObj::new(src.kind, src.key.clone())
}

fn copy_path(src: &AccessPath) -> AccessPath {
    new_object(AccessPathObj {
        header: TVMFFIObject::new::<AccessPathObj>(),
        parent: src.parent.clone(),
        step: src.step.clone(),
        depth: src.depth,
    })
}

/// `repr` of a value through the printer's callback.
fn repr_with(fn_repr: &Function, v: AnyView<'_>) -> Result<String> {
    fn_repr.call(&[v])?.get::<String>()
}

/// The `__ffi_repr__` fragment of one step.
fn step_repr(step: &AccessStepObj, fn_repr: &Function) -> Result<String> {
    let key = step.key.as_view();
    let int_key = || {
        key.as_i64()
            .ok_or_else(|| Error::type_error("AccessStep: an array step needs an int key"))
    };
    Ok(match step.kind {
        kind::ATTR => format!(
            ".{}",
            key.as_str().ok_or_else(|| Error::type_error(
                "AccessStep: an attribute step needs a str key"
            ))?
        ),
        kind::ARRAY_ITEM => format!("[{}]", int_key()?),
        kind::MAP_ITEM => format!("[{}]", repr_with(fn_repr, key)?),
        kind::ATTR_MISSING | kind::MAP_ITEM_MISSING => {
            format!("[<missing:{}>]", repr_with(fn_repr, key)?)
        }
        kind::ARRAY_ITEM_MISSING => format!("[<missing:{}>]", int_key()?),
        k => return Err(Error::value_error(format!("AccessStep: unknown kind {k}"))),
    })
}

const SCHEMA_PATH: &str = r#"{"type":"ffi.reflection.AccessPath"}"#;

fn method_schema(ret: &str, params: &[&str]) -> String {
    format!(
        r#"{{"type":"ffi.Function","named_args":{{"return":[{ret}],"params":[{}]}}}}"#,
        params.join(",")
    )
}

pub(super) fn register(sink: &dyn TypeSink) -> Result<()> {
    // SAFETY: the library's own type; the registrations below describe its Rust layout.
    let step = unsafe { TypeDef::new(sink, ACCESS_STEP_INDEX, AccessStepObj::TYPE_KEY) };
    step.metadata(
        std::mem::size_of::<AccessStepObj>(),
        kTVMFFISEqHashKindConstTreeNode,
        Some(creator::<AccessStepObj>),
    )?
    .field(FieldDef::new(
        "kind",
        offset_of!(AccessStepObj, kind),
        Accessor::I32,
        r#"{"type":"int"}"#,
    ))?
    .field(FieldDef::new(
        "key",
        offset_of!(AccessStepObj, key),
        Accessor::ANY,
        r#"{"type":"Any"}"#,
    ))?
    .shallow_copy(copy_step)?
    .attr(
        "__ffi_repr__",
        &Any::from(Function::from_typed(
            "ffi.reflection.AccessStep.__ffi_repr__",
            |s: ObjectRef<AccessStepObj>, fn_repr: Function| step_repr(&s, &fn_repr),
        )),
    )?
    .new_from_creator(creator::<AccessStepObj>)?
    .type_final(true)?;

    // SAFETY: the library's own type; the registrations below describe its Rust layout.
    let path = unsafe { TypeDef::new(sink, ACCESS_PATH_INDEX, AccessPathObj::TYPE_KEY) };
    let step_arg = r#"{"type":"ffi.reflection.AccessStep"}"#;
    let (int, any, s, b) = (
        r#"{"type":"int"}"#,
        r#"{"type":"Any"}"#,
        r#"{"type":"ffi.String"}"#,
        r#"{"type":"bool"}"#,
    );
    let p = SCHEMA_PATH;
    let m = |name: &str, params: &[&str], ret: &str, f: Function| -> Result<()> {
        path.method(name, "", false, &f, &method_schema(ret, params))?;
        Ok(())
    };
    path.metadata(
        std::mem::size_of::<AccessPathObj>(),
        kTVMFFISEqHashKindConstTreeNode,
        Some(creator::<AccessPathObj>),
    )?
    .field(FieldDef::new(
        "parent",
        offset_of!(AccessPathObj, parent),
        Accessor::object::<{ kTVMFFIObject }, true>(kTVMFFIAny),
        r#"{"type":"Optional","args":[{"type":"ffi.Object"}]}"#,
    ))?
    .field(FieldDef::new(
        "step",
        offset_of!(AccessPathObj, step),
        Accessor::object::<ACCESS_STEP_INDEX, true>(kTVMFFIAny),
        r#"{"type":"Optional","args":[{"type":"ffi.reflection.AccessStep"}]}"#,
    ))?
    .field(FieldDef::new(
        "depth",
        offset_of!(AccessPathObj, depth),
        Accessor::I32,
        r#"{"type":"int"}"#,
    ))?;
    let root = Function::from_typed("ffi.reflection.AccessPath._root", AccessPathObj::root);
    path.method("_root", "", true, &root, &method_schema(p, &[]))?;
    let name = |n: &str| format!("ffi.reflection.AccessPath.{n}");
    m(
        "_extend",
        &[p, step_arg],
        p,
        Function::from_typed(&name("_extend"), |this: AccessPath, step| {
            extend(&this, step)
        }),
    )?;
    let keyed =
        |k: i32| move |this: AccessPath, key: Any| extend(&this, AccessStepObj::new(k, key));
    let named = |k: i32| {
        move |this: AccessPath, key: String| extend(&this, AccessStepObj::new(k, Any::from(key)))
    };
    let indexed =
        |k: i32| move |this: AccessPath, i: i64| extend(&this, AccessStepObj::new(k, Any::from(i)));
    m(
        "_attr",
        &[p, s],
        p,
        Function::from_typed(&name("_attr"), named(kind::ATTR)),
    )?;
    m(
        "_array_item",
        &[p, int],
        p,
        Function::from_typed(&name("_array_item"), indexed(kind::ARRAY_ITEM)),
    )?;
    m(
        "_map_item",
        &[p, any],
        p,
        Function::from_typed(&name("_map_item"), keyed(kind::MAP_ITEM)),
    )?;
    m(
        "_attr_missing",
        &[p, s],
        p,
        Function::from_typed(&name("_attr_missing"), named(kind::ATTR_MISSING)),
    )?;
    m(
        "_array_item_missing",
        &[p, int],
        p,
        Function::from_typed(
            &name("_array_item_missing"),
            indexed(kind::ARRAY_ITEM_MISSING),
        ),
    )?;
    m(
        "_map_item_missing",
        &[p, any],
        p,
        Function::from_typed(&name("_map_item_missing"), keyed(kind::MAP_ITEM_MISSING)),
    )?;
    m(
        "_is_prefix_of",
        &[p, p],
        b,
        Function::from_typed(&name("_is_prefix_of"), |a: AccessPath, o: AccessPath| {
            is_prefix_of(&a, &o)
        }),
    )?;
    m(
        "_to_steps",
        &[p],
        r#"{"type":"ffi.Array","args":[{"type":"ffi.reflection.AccessStep"}]}"#,
        Function::from_typed(&name("_to_steps"), |a: AccessPath| -> Result<Array> {
            Ok(Array::from_vec(
                a.to_steps()?.into_iter().map(Any::from).collect(),
            ))
        }),
    )?;
    m(
        "_path_equal",
        &[p, p],
        b,
        Function::from_typed(&name("_path_equal"), |a: AccessPath, o: AccessPath| {
            path_equal(&a, &o)
        }),
    )?;
    path.shallow_copy(copy_path)?
        .attr(
            "__ffi_repr__",
            &Any::from(Function::from_typed(
                "ffi.reflection.AccessPath.__ffi_repr__",
                |a: AccessPath, fn_repr: Function| -> Result<String> {
                    let mut out = String::from("<root>");
                    for step in a.to_steps()? {
                        out.push_str(&repr_with(&fn_repr, AnyView::from(&step))?);
                    }
                    Ok(out)
                },
            )),
        )?
        .new_from_creator(creator::<AccessPathObj>)?
        .type_final(true)?;
    Ok(())
}
