//! `ffi.Function` (68): packed functions from Rust closures (packed or typed) and from C
//! (`safe_call` + self + deleter), and calls through `safe_call` (c_api.h "Function", spec §5).
//!
//! Rationale: header-compiled C++ calls `cpp_call` directly when it is non-NULL, using the C++
//! ABI, so every function we create leaves it NULL and C++ falls back to `safe_call`. Rust
//! closures are reached through one `extern "C"` trampoline that catches panics, so nothing
//! unwinds across the boundary.

use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use crate::abi::{
    kTVMFFIFunction, TVMFFIAny, TVMFFIFunctionCell, TVMFFIObject, TVMFFISafeCallType,
};
use crate::any::{Any, AnyView, FromAny};
use crate::error::{fetch_raised, set_raised, Error, Result};
use crate::object::{new_object, ObjectRef, ObjectType};

/// A packed Rust function: borrowed arguments in, an owned result out.
pub type PackedFn = dyn Fn(&[AnyView<'_>]) -> Result<Any> + Send + Sync + 'static;

/// A C deleter of a function's `self` pointer.
pub type SelfDeleter = Option<unsafe extern "C" fn(*mut c_void)>;

enum Imp {
    Rust(Box<PackedFn>),
    /// `safe_call(self_, ...)` through the foreign trampoline; `deleter(self_)` on destruction.
    Foreign {
        self_: *mut c_void,
        safe_call: TVMFFISafeCallType,
        deleter: SelfDeleter,
        /// `safe_call` may return without running (a ctypes thunk whose Python callable could not
        /// be entered leaves its int result unwritten): see `checked_foreign_call`.
        checked: bool,
    },
    /// `cell.safe_call` is the caller's own function, called with the function handle.
    Direct,
    /// An exported symbol of a loaded library, called with a NULL handle; `keep` (the module)
    /// keeps the library loaded.
    Symbol {
        call: TVMFFISafeCallType,
        _keep: ObjectRef<crate::object::Object>,
    },
}

/// Payload of `ffi.Function`.
#[repr(C)]
pub struct FunctionObj {
    pub header: TVMFFIObject,
    pub cell: TVMFFIFunctionCell,
    imp: Imp,
}

// SAFETY: repr(C), header first, fixed static index.
unsafe impl ObjectType for FunctionObj {
    const TYPE_KEY: &'static str = "ffi.Function";
    #[inline]
    fn type_index() -> i32 {
        kTVMFFIFunction
    }
    #[inline]
    fn is_instance(type_index: i32) -> bool {
        type_index == kTVMFFIFunction
    }
}

// SAFETY: Rust closures are Send + Sync; foreign `self` pointers are the C creator's promise
// (the ABI calls functions from any thread).
unsafe impl Send for FunctionObj {}
// SAFETY: as above.
unsafe impl Sync for FunctionObj {}

impl Drop for FunctionObj {
    fn drop(&mut self) {
        if let Imp::Foreign {
            self_,
            deleter: Some(d),
            ..
        } = self.imp
        {
            // SAFETY: the creator asked for `deleter(self)` when the function dies.
            unsafe { d(self_) };
        }
    }
}

/// Writes the outcome of a Rust call into the C result slot.
#[inline]
fn finish(outcome: std::thread::Result<Result<Any>>, result: *mut TVMFFIAny) -> c_int {
    match outcome {
        Ok(Ok(v)) => {
            // SAFETY: the caller passes a writable result slot.
            unsafe { *result = v.into_raw() };
            0
        }
        Ok(Err(e)) => {
            set_raised(e);
            -1
        }
        Err(panic) => {
            set_raised(Error::from_panic(panic));
            -1
        }
    }
}

unsafe extern "C" fn rust_trampoline(
    handle: *mut c_void,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> c_int {
    if handle.is_null() || result.is_null() {
        set_raised(Error::value_error(
            "ffi.Function call: NULL function handle or result slot",
        ));
        return -1;
    }
    // SAFETY: this trampoline is only installed in FunctionObj values of kind Rust.
    let obj = unsafe { &*(handle as *const FunctionObj) };
    let Imp::Rust(f) = &obj.imp else {
        unreachable!("rust trampoline on a foreign function")
    };
    // SAFETY: the caller passes `num_args` valid views that outlive the call.
    let args = unsafe { AnyView::slice_from_raw(args, num_args) };
    finish(catch_unwind(AssertUnwindSafe(|| f(args))), result)
}

unsafe extern "C" fn foreign_trampoline(
    handle: *mut c_void,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> c_int {
    // SAFETY: installed only in FunctionObj values of kind Foreign.
    let obj = unsafe { &*(handle as *const FunctionObj) };
    let Imp::Foreign {
        self_,
        safe_call: Some(call),
        checked,
        ..
    } = obj.imp
    else {
        set_raised(Error::internal(
            "ffi.Function: foreign function without safe_call",
        ));
        return -1;
    };
    if checked {
        // SAFETY: as below; the result slot is the caller's.
        return unsafe { checked_foreign_call(call, self_, args, num_args, result) };
    }
    // SAFETY: forwarding the caller's arguments to the creator's function.
    unsafe { call(self_, args, num_args, result) }
}

/// A type index no value has: still in the result slot after the call, the callee never wrote
/// a result.
const NOT_WRITTEN: i32 = i32::MIN;

/// Calls a `checked` foreign function without trusting its return code, which is garbage when a
/// ctypes thunk could not enter its Python callable (the recursion limit, a pending signal):
/// CPython's `_CallPythonObject` then returns without writing the result register's slot. The
/// callee's protocol instead: on success it always writes the result; on failure it raises.
///
/// # Safety
/// As `foreign_trampoline`; `result` is a writable result slot.
unsafe fn checked_foreign_call(
    call: unsafe extern "C" fn(*mut c_void, *const TVMFFIAny, i32, *mut TVMFFIAny) -> c_int,
    self_: *mut c_void,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> c_int {
    let stale = crate::error::take_raised(); // so that an error raised by the callee is seen
    let mut out = TVMFFIAny {
        type_index: NOT_WRITTEN,
        ..TVMFFIAny::NONE
    };
    // SAFETY: forwarding the caller's arguments; the return code is deliberately not read.
    let _ = unsafe { call(self_, args, num_args, &mut out) };
    if let Some(err) = crate::error::take_raised() {
        // A result the callee wrote before failing is owned and nobody's. A Python callee may
        // be interrupted between writing the type index and the object pointer (which is then
        // still null): only a complete object result is released.
        let object = out.type_index >= crate::abi::kTVMFFIStaticObjectBegin;
        // SAFETY: reading the union member the type index names.
        if out.type_index != NOT_WRITTEN && (!object || !unsafe { out.value.v_obj }.is_null()) {
            // SAFETY: a complete owned value (checked above).
            drop(unsafe { Any::from_raw(out) });
        }
        set_raised(err);
        return -1;
    }
    if out.type_index == NOT_WRITTEN {
        set_raised(Error::new(
            "RecursionError",
            "a foreign (Python) callback could not be entered and returned no result \
             (recursion limit or a pending signal)",
        ));
        return -1;
    }
    if let Some(e) = stale {
        set_raised(e);
    }
    // SAFETY: the caller's writable result slot; the value is owned and moves there.
    unsafe { *result = out };
    0
}

unsafe extern "C" fn symbol_trampoline(
    handle: *mut c_void,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> c_int {
    // SAFETY: installed only in FunctionObj values of kind Symbol.
    let obj = unsafe { &*(handle as *const FunctionObj) };
    let Imp::Symbol {
        call: Some(call), ..
    } = obj.imp
    else {
        set_raised(Error::internal(
            "ffi.Function: library symbol without an address",
        ));
        return -1;
    };
    // SAFETY: exported library functions are called with a NULL self, as the official loader does.
    unsafe { call(ptr::null_mut(), args, num_args, result) }
}

/// Owning handle to an `ffi.Function`.
pub type Function = ObjectRef<FunctionObj>;

impl ObjectRef<FunctionObj> {
    /// A function from a packed closure.
    pub fn from_packed<F>(f: F) -> Function
    where
        F: Fn(&[AnyView<'_>]) -> Result<Any> + Send + Sync + 'static,
    {
        new_object(FunctionObj {
            header: TVMFFIObject::new::<FunctionObj>(),
            cell: TVMFFIFunctionCell {
                safe_call: Some(rust_trampoline),
                cpp_call: ptr::null_mut(),
            },
            imp: Imp::Rust(Box::new(f)),
        })
    }

    /// A function from a typed closure, e.g. `Function::from_typed("add", |a: i64, b: i64| a + b)`.
    /// Argument count and types are checked on every call with errors naming `name`.
    pub fn from_typed<Args, F: TypedFn<Args>>(name: &str, f: F) -> Function {
        let name: std::sync::Arc<str> = name.into();
        Function::from_packed(move |args| f.call_typed(&name, args))
    }

    /// A function from C (`TVMFFIFunctionCreate`): with `self_` and `deleter` both NULL the
    /// function *is* `safe_call` and receives its own handle; otherwise `safe_call` receives
    /// `self_` and `deleter(self_)` runs on destruction.
    ///
    /// # Safety
    /// `safe_call` must follow the packed calling convention for the `self_` it receives (its
    /// own handle when `self_` and `deleter` are NULL), from any thread, for as long as the
    /// function lives; `deleter`, if any, must accept `self_` once.
    pub unsafe fn from_c(
        self_: *mut c_void,
        safe_call: TVMFFISafeCallType,
        deleter: SelfDeleter,
    ) -> Result<Function> {
        // SAFETY: forwarded.
        unsafe { Function::from_c_with(self_, safe_call, deleter, false) }
    }

    /// As `from_c`, for a `safe_call` that always writes the result on success and raises on
    /// failure, but whose return code may be garbage (a ctypes thunk): calls never read it.
    ///
    /// # Safety
    /// As `from_c`.
    pub unsafe fn from_c_checked(
        self_: *mut c_void,
        safe_call: TVMFFISafeCallType,
        deleter: SelfDeleter,
    ) -> Result<Function> {
        // SAFETY: forwarded.
        unsafe { Function::from_c_with(self_, safe_call, deleter, true) }
    }

    unsafe fn from_c_with(
        self_: *mut c_void,
        safe_call: TVMFFISafeCallType,
        deleter: SelfDeleter,
        checked: bool,
    ) -> Result<Function> {
        if safe_call.is_none() {
            return Err(Error::value_error(
                "TVMFFIFunctionCreate: `safe_call` must not be NULL",
            ));
        }
        let (cell_call, imp) = if self_.is_null() && deleter.is_none() && !checked {
            (safe_call, Imp::Direct)
        } else {
            (
                Some(foreign_trampoline as unsafe extern "C" fn(_, _, _, _) -> _),
                Imp::Foreign {
                    self_,
                    safe_call,
                    deleter,
                    checked,
                },
            )
        };
        Ok(new_object(FunctionObj {
            header: TVMFFIObject::new::<FunctionObj>(),
            cell: TVMFFIFunctionCell {
                safe_call: cell_call,
                cpp_call: ptr::null_mut(),
            },
            imp,
        }))
    }

    /// A function over an exported `__tvm_ffi_<name>` symbol, called with a NULL handle; `keep`
    /// (the module that loaded it) stays alive as long as the function.
    ///
    /// # Safety
    /// `call` must be a packed function that accepts a NULL handle, and `keep` must keep its
    /// code loaded.
    pub unsafe fn from_symbol(
        call: TVMFFISafeCallType,
        keep: ObjectRef<crate::object::Object>,
    ) -> Function {
        new_object(FunctionObj {
            header: TVMFFIObject::new::<FunctionObj>(),
            cell: TVMFFIFunctionCell {
                safe_call: Some(symbol_trampoline),
                cpp_call: ptr::null_mut(),
            },
            imp: Imp::Symbol { call, _keep: keep },
        })
    }

    /// Calls with borrowed arguments; the result is owned.
    #[inline]
    pub fn call(&self, args: &[AnyView<'_>]) -> Result<Any> {
        // SAFETY: the handle is alive and arguments outlive the call.
        unsafe {
            call_raw(
                self.as_raw(),
                args.as_ptr() as *const TVMFFIAny,
                args.len() as i32,
            )
        }
    }
}

/// Calls any function object (ours or foreign) through its `safe_call`.
///
/// # Safety
/// `func` must be a live `ffi.Function`; `args` must point at `n` valid views.
#[inline]
pub unsafe fn call_raw(func: *mut TVMFFIObject, args: *const TVMFFIAny, n: i32) -> Result<Any> {
    // SAFETY: functions carry their cell right after the header.
    let cell = unsafe { &(*(func as *const FunctionObj)).cell };
    let Some(safe_call) = cell.safe_call else {
        return Err(Error::internal("ffi.Function has a NULL safe_call"));
    };
    let mut result = Any::none();
    // SAFETY: the calling convention of spec §5: result starts as None.
    let rc = unsafe { safe_call(func as *mut c_void, args, n, result.as_out_ptr()) };
    if rc == 0 {
        Ok(result)
    } else {
        Err(fetch_raised("ffi.Function call"))
    }
}

/// Return types a typed function may have: a value convertible to `Any`, or a `Result` of one.
pub trait FnReturn {
    /// Converts to the packed result.
    fn into_result(self) -> Result<Any>;
    /// The type schema of the returned value.
    fn schema() -> String;
}

/// Values that convert into an owned `Any` (the returns of typed functions).
pub trait IntoAny {
    /// The conversion.
    fn into_any(self) -> Any;
    /// The type schema JSON.
    fn schema() -> String;
}

macro_rules! into_any_via_from {
    ($($t:ty => $name:literal),* $(,)?) => {$(
        impl IntoAny for $t {
            #[inline]
            fn into_any(self) -> Any { Any::from(self) }
            fn schema() -> String { format!("{{\"type\":\"{}\"}}", $name) }
        }
    )*};
}

into_any_via_from!(
    i64 => "int", i32 => "int", u32 => "int", usize => "int", bool => "bool", f64 => "float",
    f32 => "float", String => "ffi.String", &str => "ffi.String", () => "None",
    crate::abi::DLDevice => "Device", crate::abi::DLDataType => "DataType",
);

impl IntoAny for Any {
    #[inline]
    fn into_any(self) -> Any {
        self
    }
    fn schema() -> String {
        "{\"type\":\"Any\"}".into()
    }
}

impl<T: ObjectType> IntoAny for ObjectRef<T> {
    #[inline]
    fn into_any(self) -> Any {
        Any::from_object(self)
    }
    fn schema() -> String {
        format!("{{\"type\":\"{}\"}}", T::TYPE_KEY)
    }
}

impl<T: IntoAny> IntoAny for Option<T> {
    #[inline]
    fn into_any(self) -> Any {
        self.map_or_else(Any::none, IntoAny::into_any)
    }
    fn schema() -> String {
        format!("{{\"type\":\"Optional\",\"args\":[{}]}}", T::schema())
    }
}

impl<T: IntoAny> FnReturn for T {
    #[inline]
    fn into_result(self) -> Result<Any> {
        Ok(self.into_any())
    }
    fn schema() -> String {
        <T as IntoAny>::schema()
    }
}

impl<T: IntoAny> FnReturn for Result<T> {
    #[inline]
    fn into_result(self) -> Result<Any> {
        self.map(IntoAny::into_any)
    }
    fn schema() -> String {
        <T as IntoAny>::schema()
    }
}

/// Closures callable with typed arguments converted from packed views.
pub trait TypedFn<Args>: Send + Sync + 'static {
    /// Checks count and types, then calls.
    fn call_typed(&self, name: &str, args: &[AnyView<'_>]) -> Result<Any>;
    /// Parameter type names, for signatures in messages.
    fn param_names() -> Vec<&'static str>;
    /// The `type_schema` JSON of the function.
    fn type_schema() -> String;
    /// The return type's schema name.
    fn return_name() -> String;
}

/// `name(0: int, 1: float) -> int`, as in the official mismatch messages.
pub fn signature(name: &str, params: &[&str], ret: &str) -> String {
    let ps: Vec<String> = params
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{i}: {t}"))
        .collect();
    format!("{name}({}) -> {ret}", ps.join(", "))
}

#[cold]
fn arg_count_error(name: &str, params: &[&str], ret: &str, got: usize) -> Error {
    Error::type_error(format!(
        "Mismatched number of arguments when calling: `{}`. Expected {} but got {} arguments",
        signature(name, params, ret),
        params.len(),
        got
    ))
}

#[cold]
fn arg_type_error(
    name: &str,
    params: &[&str],
    ret: &str,
    i: usize,
    got: &AnyView<'_>,
    why: Option<String>,
) -> Error {
    // A value of the right kind that the parameter cannot hold (a string that is not UTF-8 for
    // a `&str`, an int out of an `i32`'s range) says why, instead of naming its type as if that
    // were the mismatch.
    Error::type_error(format!(
        "Mismatched type on argument #{i} when calling: `{}`. Expected `{}` but got `{}`{}",
        signature(name, params, ret),
        params[i],
        mismatch_type_key(got),
        why.map(|w| format!(" ({w})")).unwrap_or_default()
    ))
}

/// The type a mismatch message names: the value's own type index for non-objects (a short string
/// reads `ffi.SmallStr`, as in the official messages), the object's runtime type otherwise.
pub fn mismatch_type_key(got: &AnyView<'_>) -> String {
    if got.type_index() >= crate::abi::kTVMFFIStaticObjectBegin {
        got.type_key()
    } else {
        crate::type_table::type_key_of(got.type_index())
    }
}

/// The name a signature shows for a schema type name, as the official signatures spell them.
fn type_str(schema_name: &str) -> &str {
    match schema_name {
        "ffi.String" => "str",
        "ffi.Bytes" => "bytes",
        other => other,
    }
}

fn return_type_name(schema: &str) -> String {
    // None returns print as `void`; composite types as `Optional<Tuple<A, B>>`.
    match crate::json::parse(schema.as_bytes()) {
        Ok(v) => match schema_type_str(&v) {
            n if n == "None" => "void".to_string(),
            n => n,
        },
        Err(_) => "Any".to_string(),
    }
}

/// The official `TypeStr` of a type schema (`{"type": T, "args": [...]}`): containers with
/// arguments print as `Array<int>`, `Map<str, Any>`, `Optional<T>`; other types by key.
fn schema_type_str(schema: &crate::any::Any) -> String {
    let Some(map) = schema.as_view().as_object_of::<crate::map::MapObj>() else {
        return "Any".to_string();
    };
    let name = map
        .get_str("type")
        .ok()
        .flatten()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "Any".to_string());
    let args: Vec<String> = map
        .get_str("args")
        .ok()
        .flatten()
        .and_then(|v| v.as_object_of::<crate::array::ArrayObj>())
        .map(|a| a.to_vec().iter().map(schema_type_str).collect())
        .unwrap_or_default();
    if args.is_empty() {
        return type_str(&name).to_string();
    }
    let short = match name.as_str() {
        "ffi.Array" => "Array",
        "ffi.List" => "List",
        "ffi.Map" => "Map",
        "ffi.Dict" => "Dict",
        other => other,
    };
    format!("{short}<{}>", args.join(", "))
}

macro_rules! typed_fn {
    ($($a:ident : $i:tt),*) => {
        impl<F, R, $($a),*> TypedFn<($($a,)*)> for F
        where
            F: Fn($($a),*) -> R + Send + Sync + 'static,
            R: FnReturn,
            $($a: FromAny,)*
        {
            #[inline]
            #[allow(unused_variables, non_snake_case)]
            fn call_typed(&self, name: &str, args: &[AnyView<'_>]) -> Result<Any> {
                const N: usize = { let a: &[usize] = &[$($i),*]; a.len() };
                if args.len() != N {
                    return Err(arg_count_error(name, &Self::param_names(), &Self::return_name(), args.len()));
                }
                $(
                    let $a = match $a::try_from_view(&args[$i]) {
                        Some(v) => v,
                        None => return Err(arg_type_error(
                            name, &Self::param_names(), &Self::return_name(), $i, &args[$i],
                            $a::refusal(&args[$i]))),
                    };
                )*
                self($($a),*).into_result()
            }
            fn param_names() -> Vec<&'static str> {
                vec![$(type_str($a::TYPE_NAME)),*]
            }
            fn type_schema() -> String {
                let params: Vec<String> = vec![$($a::schema()),*];
                format!(
                    "{{\"type\":\"ffi.Function\",\"named_args\":{{\"return\":[{}],\"params\":[{}]}}}}",
                    R::schema(),
                    params.join(",")
                )
            }
            fn return_name() -> String {
                return_type_name(&R::schema())
            }
        }
    };
}

typed_fn!();
typed_fn!(A0: 0);
typed_fn!(A0: 0, A1: 1);
typed_fn!(A0: 0, A1: 1, A2: 2);
typed_fn!(A0: 0, A1: 1, A2: 2, A3: 3);
typed_fn!(A0: 0, A1: 1, A2: 2, A3: 3, A4: 4);
typed_fn!(A0: 0, A1: 1, A2: 2, A3: 3, A4: 4, A5: 5);
typed_fn!(A0: 0, A1: 1, A2: 2, A3: 3, A4: 4, A5: 5, A6: 6);
typed_fn!(A0: 0, A1: 1, A2: 2, A3: 3, A4: 4, A5: 5, A6: 6, A7: 7);

#[cfg(test)]
mod tests {
    use super::*;

    /// What a ctypes thunk does when CPython cannot enter its callable: returns whatever its
    /// return slot held (here 0: "success") and writes nothing.
    unsafe extern "C" fn not_entered(
        _: *mut c_void,
        _: *const TVMFFIAny,
        _: i32,
        _: *mut TVMFFIAny,
    ) -> c_int {
        0
    }

    /// Writes 7 and returns garbage (a nonzero rc the checked call must not read).
    unsafe extern "C" fn writes_with_garbage_rc(
        _: *mut c_void,
        _: *const TVMFFIAny,
        _: i32,
        out: *mut TVMFFIAny,
    ) -> c_int {
        // SAFETY: the caller's result slot.
        unsafe { *out = Any::from(7i64).into_raw() };
        0x5a5a
    }

    /// Raises, after writing the type index of an object but not its pointer (a Python callee
    /// interrupted between the two writes), and returns 0.
    unsafe extern "C" fn raises_half_written(
        _: *mut c_void,
        _: *const TVMFFIAny,
        _: i32,
        out: *mut TVMFFIAny,
    ) -> c_int {
        // SAFETY: the caller's result slot.
        unsafe { (*out).type_index = crate::abi::kTVMFFIStr };
        set_raised(Error::value_error("raised by the callee"));
        0
    }

    #[test]
    fn checked_foreign_functions_do_not_trust_the_return_code() {
        let mk = |call| {
            // SAFETY: the callees above ignore `self`, and there is no deleter.
            unsafe { Function::from_c_checked(1 as *mut c_void, Some(call), None) }.unwrap()
        };
        let e = mk(not_entered).call(&[]).unwrap_err();
        assert_eq!(e.kind(), "RecursionError");
        assert!(
            e.message().contains("could not be entered"),
            "{}",
            e.message()
        );
        let r = mk(writes_with_garbage_rc).call(&[]).unwrap();
        assert_eq!(r.get::<i64>().unwrap(), 7);
        let e = mk(raises_half_written).call(&[]).unwrap_err();
        assert_eq!(e.kind(), "ValueError");
        assert_eq!(e.message(), "raised by the callee");
        // the unchecked kind trusts it, as the ABI says
        // SAFETY: as above.
        let plain = unsafe { Function::from_c(1 as *mut c_void, Some(not_entered), None) }.unwrap();
        assert_eq!(
            plain.call(&[]).unwrap().type_index(),
            crate::abi::kTVMFFINone
        );
    }

    #[test]
    fn typed_argument_refusals_say_why() {
        let f = Function::from_typed("t.f", |a: i32, s: String| format!("{a}{s}"));
        let (big, x) = (Any::from(1i64 << 40), Any::from("x"));
        let e = f.call(&[big.as_view(), x.as_view()]).unwrap_err();
        assert_eq!(
            e.message(),
            "Mismatched type on argument #0 when calling: `t.f(0: int, 1: str) -> str`. \
             Expected `int` but got `int` (1099511627776 is out of range for i32)"
        );
        // SAFETY: an owned value made just now.
        let bad = unsafe { Any::from_raw(crate::string::StrObj::any_from(b"\xff")) };
        let e = f.call(&[AnyView::from(1i32), bad.as_view()]).unwrap_err();
        assert!(
            e.message()
                .ends_with("but got `ffi.SmallStr` (a string that is not valid UTF-8)"),
            "{}",
            e.message()
        );
        // a non-UTF-8 string given for an int is a plain type mismatch
        let e = f.call(&[bad.as_view(), x.as_view()]).unwrap_err();
        assert!(
            e.message().ends_with("but got `ffi.SmallStr`"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn packed_and_typed_calls() {
        let f = Function::from_packed(|args| Ok(Any::from(args.len() as i64)));
        assert!(f.cell.cpp_call.is_null());
        let r = f.call(&[AnyView::from(1i64), AnyView::NONE]).unwrap();
        assert_eq!(r.get::<i64>().unwrap(), 2);

        let add = Function::from_typed("add", |a: i64, b: i64| a + b);
        assert_eq!(
            add.call(&[1i64.into(), 2i64.into()])
                .unwrap()
                .get::<i64>()
                .unwrap(),
            3
        );
        let e = add.call(&[1i64.into()]).unwrap_err();
        assert_eq!(e.kind(), "TypeError");
        assert!(
            e.message()
                .contains("`add(0: int, 1: int) -> int`. Expected 2 but got 1"),
            "{}",
            e.message()
        );
        let s = Any::from("not an int at all");
        let e = add.call(&[1i64.into(), s.as_view()]).unwrap_err();
        assert!(e.message().contains("argument #1"), "{}", e.message());
        assert!(
            e.message().contains("Expected `int` but got `ffi.String`"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn errors_and_panics_become_raised_errors() {
        let f = Function::from_typed("fail", || -> Result<i64> {
            Err(Error::value_error("nope"))
        });
        let e = f.call(&[]).unwrap_err();
        assert_eq!((e.kind(), e.message().as_ref()), ("ValueError", "nope"));
        let p = Function::from_packed(|_| panic!("boom"));
        let e = p.call(&[]).unwrap_err();
        assert_eq!(e.kind(), "InternalError");
        assert!(e.message().contains("boom"));
    }

    #[test]
    fn type_schema_of_typed_function() {
        fn schema<Args, F: TypedFn<Args>>(_: &F) -> String {
            F::type_schema()
        }
        assert_eq!(
            schema(&|a: i64, _b: Option<String>| a),
            r#"{"type":"ffi.Function","named_args":{"return":[{"type":"int"}],"params":[{"type":"int"},{"type":"Optional","args":[{"type":"ffi.String"}]}]}}"#
        );
    }

    unsafe extern "C" fn c_add_self(
        self_: *mut c_void,
        args: *const TVMFFIAny,
        n: i32,
        result: *mut TVMFFIAny,
    ) -> c_int {
        // SAFETY: test harness passes valid pointers.
        unsafe {
            let base = *(self_ as *const i64);
            let args = AnyView::slice_from_raw(args, n);
            *result = Any::from(base + args[0].as_i64().unwrap()).into_raw();
        }
        0
    }

    unsafe extern "C" fn free_box(p: *mut c_void) {
        // SAFETY: created with Box::into_raw below.
        drop(unsafe { Box::from_raw(p as *mut i64) });
    }

    #[test]
    fn foreign_function_with_self_and_deleter() {
        let self_ = Box::into_raw(Box::new(40i64)) as *mut c_void;
        // SAFETY: c_add_self reads the boxed i64 that free_box releases.
        let f = unsafe { Function::from_c(self_, Some(c_add_self), Some(free_box)) }.unwrap();
        assert_eq!(f.call(&[2i64.into()]).unwrap().get::<i64>().unwrap(), 42);
        drop(f);
    }
}
