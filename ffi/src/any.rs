//! `Any` (owned) and `AnyView<'a>` (borrowed) over `TVMFFIAny` (c_api.h "Any"), with the
//! conversions of every static type index in both directions.
//!
//! Rationale: the calling convention is "borrowed in, owned out", so the two types differ only in
//! what `Drop` does; both are `#[repr(transparent)]` so that argument arrays and result slots can
//! be handed to C without copying. Conversions go through two small traits, `IntoAny` and
//! `FromAny`, whose failures are TypeErrors naming both types.

use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;

use crate::abi::*;
use crate::error::{Error, Result};
use crate::object::{dec_ref, inc_ref, Object, ObjectRef, ObjectType};
use crate::string::{raw_any_bytes, BytesObj, StrObj};

/// An owned value: objects inside hold one strong reference, released on drop.
#[repr(transparent)]
pub struct Any(TVMFFIAny);

/// A borrowed value: valid for `'a`, never released by the holder.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct AnyView<'a> {
    raw: TVMFFIAny,
    _borrow: PhantomData<&'a ()>,
}

// SAFETY: values are PODs or references to objects with atomic counts.
unsafe impl Send for Any {}
// SAFETY: as above.
unsafe impl Sync for Any {}

impl Default for Any {
    fn default() -> Self {
        Any::none()
    }
}

impl Any {
    /// None.
    #[inline]
    pub const fn none() -> Self {
        Any(TVMFFIAny::NONE)
    }

    /// Adopts a raw owned value.
    ///
    /// # Safety
    /// `raw` must be a valid owned Any (objects carry a reference the caller gives up, and the
    /// type index is never RawStr, ByteArrayPtr or ObjectRValueRef).
    #[inline]
    pub unsafe fn from_raw(raw: TVMFFIAny) -> Self {
        Any(raw)
    }

    /// Gives the value away as a raw owned Any.
    #[inline]
    pub fn into_raw(self) -> TVMFFIAny {
        let raw = self.0;
        std::mem::forget(self);
        raw
    }

    /// The raw value, still owned by `self`.
    #[inline]
    pub fn raw(&self) -> &TVMFFIAny {
        &self.0
    }

    /// Pointer for use as a C out-parameter; the slot must hold None (or a POD) when passed.
    #[inline]
    pub fn as_out_ptr(&mut self) -> *mut TVMFFIAny {
        &mut self.0
    }

    /// The type index.
    #[inline]
    pub fn type_index(&self) -> i32 {
        self.0.type_index
    }

    /// A borrowed view of this value.
    #[inline]
    pub fn as_view(&self) -> AnyView<'_> {
        AnyView {
            raw: self.0,
            _borrow: PhantomData,
        }
    }

    /// Converts to `T`, or a TypeError naming both types.
    #[inline]
    pub fn get<T: FromAny>(&self) -> Result<T> {
        self.as_view().get()
    }

    /// Copies a raw view into a new owned value (`TVMFFIAnyViewToOwnedAny`): objects gain a
    /// reference, RawStr/ByteArrayPtr become String/Bytes, ObjectRValueRef moves the object out
    /// of its slot.
    ///
    /// # Safety
    /// `view` must be a valid Any view whose targets are alive.
    pub unsafe fn copy_from_raw_view(view: &TVMFFIAny) -> Result<Any> {
        let ti = view.type_index;
        // SAFETY: each arm reads the union member its type index names.
        unsafe {
            if ti >= kTVMFFIStaticObjectBegin {
                if !view.value.v_obj.is_null() {
                    inc_ref(view.value.v_obj);
                }
                return Ok(Any(*view));
            }
            match ti {
                kTVMFFIRawStr => match raw_any_bytes(view) {
                    Some(b) => Ok(Any(StrObj::any_from(b))),
                    None => Err(Error::value_error(
                        "AnyViewToOwnedAny: RawStr view holds a NULL pointer",
                    )),
                },
                kTVMFFIByteArrayPtr => match raw_any_bytes(view) {
                    Some(b) => Ok(Any(BytesObj::any_from(b))),
                    None => Err(Error::value_error(
                        "AnyViewToOwnedAny: ByteArrayPtr view holds a NULL pointer",
                    )),
                },
                kTVMFFIObjectRValueRef => {
                    let slot = view.value.v_ptr as *mut *mut TVMFFIObject;
                    if slot.is_null() || (*slot).is_null() {
                        return Err(Error::value_error(
                            "AnyViewToOwnedAny: ObjectRValueRef points at an empty slot (already moved)",
                        ));
                    }
                    let obj = std::ptr::replace(slot, std::ptr::null_mut());
                    Ok(Any(TVMFFIAny {
                        type_index: (*obj).type_index,
                        small_str_len: 0,
                        value: TVMFFIAnyValue { v_obj: obj },
                    }))
                }
                _ => Ok(Any(*view)),
            }
        }
    }

    /// Wraps an owned object reference.
    #[inline]
    pub fn from_object<T: ObjectType>(obj: ObjectRef<T>) -> Any {
        let ti = obj.type_index();
        Any(TVMFFIAny {
            type_index: ti,
            small_str_len: 0,
            value: TVMFFIAnyValue {
                v_obj: obj.into_raw(),
            },
        })
    }

    /// Takes the object out, if this value holds one.
    pub fn into_object(self) -> Option<ObjectRef<Object>> {
        if self.type_index() >= kTVMFFIStaticObjectBegin {
            // SAFETY: object Anys hold a non-null strong reference that we transfer.
            let p = unsafe { self.0.value.v_obj };
            std::mem::forget(self);
            // SAFETY: as above; `Object` is the header-only view of every object.
            Some(unsafe { ObjectRef::from_raw_owned(NonNull::new_unchecked(p as *mut Object)) })
        } else {
            None
        }
    }
}

impl Clone for Any {
    #[inline]
    fn clone(&self) -> Self {
        if self.0.type_index >= kTVMFFIStaticObjectBegin {
            // SAFETY: owned object values hold a live strong reference.
            unsafe { inc_ref(self.0.value.v_obj) };
        }
        Any(self.0)
    }
}

impl Drop for Any {
    #[inline]
    fn drop(&mut self) {
        if self.0.type_index >= kTVMFFIStaticObjectBegin {
            // SAFETY: we own one strong reference.
            unsafe { dec_ref(self.0.value.v_obj) };
        }
    }
}

impl<'a> AnyView<'a> {
    /// None.
    pub const NONE: AnyView<'static> = AnyView {
        raw: TVMFFIAny::NONE,
        _borrow: PhantomData,
    };

    /// Wraps a raw view.
    ///
    /// # Safety
    /// The targets of `raw` must stay alive for `'a`.
    #[inline]
    pub unsafe fn from_raw(raw: TVMFFIAny) -> Self {
        AnyView {
            raw,
            _borrow: PhantomData,
        }
    }

    /// A slice of views over a C argument array.
    ///
    /// # Safety
    /// `args` must point at `n` valid views (or `n == 0`) living for `'a`.
    #[inline]
    pub unsafe fn slice_from_raw(args: *const TVMFFIAny, n: i32) -> &'a [AnyView<'a>] {
        if n <= 0 || args.is_null() {
            return &[];
        }
        // SAFETY: AnyView is transparent over TVMFFIAny; bounds per the caller.
        unsafe { std::slice::from_raw_parts(args as *const AnyView<'a>, n as usize) }
    }

    /// The raw value.
    #[inline]
    pub fn raw(&self) -> &TVMFFIAny {
        &self.raw
    }

    /// The type index.
    #[inline]
    pub fn type_index(&self) -> i32 {
        self.raw.type_index
    }

    /// Whether this is None.
    #[inline]
    pub fn is_none(&self) -> bool {
        self.raw.type_index == kTVMFFINone
    }

    /// The key of the held type, for messages (`ffi.String` for both string encodings; the
    /// runtime type for objects).
    pub fn type_key(&self) -> String {
        match self.raw.type_index {
            kTVMFFISmallStr => "ffi.String".into(),
            kTVMFFISmallBytes => "ffi.Bytes".into(),
            ti if ti >= kTVMFFIStaticObjectBegin => {
                // SAFETY: object views point at live objects.
                let real = unsafe { (*self.raw.value.v_obj).type_index };
                crate::type_table::type_key_of(real)
            }
            ti => crate::type_table::type_key_of(ti),
        }
    }

    /// A new owned copy.
    #[inline]
    pub fn to_owned(&self) -> Result<Any> {
        // SAFETY: a view's targets are alive for 'a.
        unsafe { Any::copy_from_raw_view(&self.raw) }
    }

    /// Converts to `T`, or a TypeError naming both types (and, for a value of the right kind
    /// that `T` cannot hold, why: an int out of `T`'s range, a string that is not UTF-8).
    #[inline]
    pub fn get<T: FromAny>(&self) -> Result<T> {
        match T::try_from_view(self) {
            Some(v) => Ok(v),
            None => Err(self.get_error::<T>()),
        }
    }

    #[cold]
    fn get_error<T: FromAny>(&self) -> Error {
        let why = T::refusal(self)
            .map(|w| format!(" ({w})"))
            .unwrap_or_default();
        Error::type_error(format!(
            "expected {}, got {}{why}",
            T::TYPE_NAME,
            self.type_key()
        ))
    }

    /// An integer (Int or Bool).
    #[inline]
    pub fn as_i64(&self) -> Option<i64> {
        match self.raw.type_index {
            // SAFETY: Int and Bool store v_int64.
            kTVMFFIInt | kTVMFFIBool => Some(unsafe { self.raw.value.v_int64 }),
            _ => None,
        }
    }

    /// A float (Float, Int or Bool).
    #[inline]
    pub fn as_f64(&self) -> Option<f64> {
        match self.raw.type_index {
            // SAFETY: Float stores v_float64.
            kTVMFFIFloat => Some(unsafe { self.raw.value.v_float64 }),
            // SAFETY: Int and Bool store v_int64.
            kTVMFFIInt | kTVMFFIBool => Some(unsafe { self.raw.value.v_int64 } as f64),
            _ => None,
        }
    }

    /// A bool (Bool or Int).
    #[inline]
    pub fn as_bool(&self) -> Option<bool> {
        self.as_i64().map(|v| v != 0)
    }

    /// String content (SmallStr, Str or RawStr), if valid UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        match self.raw.type_index {
            kTVMFFISmallStr | kTVMFFIStr | kTVMFFIRawStr => {
                // SAFETY: the view's targets live for 'a, and inline bytes live in self.
                std::str::from_utf8(unsafe { raw_any_bytes(&self.raw) }?).ok()
            }
            _ => None,
        }
    }

    /// String content (SmallStr, Str or RawStr) as bytes, valid UTF-8 or not (an `ffi.String`
    /// holds any bytes).
    pub fn as_str_bytes(&self) -> Option<&[u8]> {
        match self.raw.type_index {
            // SAFETY: as for as_str.
            kTVMFFISmallStr | kTVMFFIStr | kTVMFFIRawStr => unsafe { raw_any_bytes(&self.raw) },
            _ => None,
        }
    }

    /// Bytes content (SmallBytes, Bytes or ByteArrayPtr).
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self.raw.type_index {
            // SAFETY: as for as_str.
            kTVMFFISmallBytes | kTVMFFIBytes | kTVMFFIByteArrayPtr => unsafe {
                raw_any_bytes(&self.raw)
            },
            _ => None,
        }
    }

    /// The object pointer, borrowed.
    #[inline]
    pub fn as_object_ptr(&self) -> Option<*mut TVMFFIObject> {
        if self.raw.type_index >= kTVMFFIStaticObjectBegin {
            // SAFETY: object views store v_obj.
            Some(unsafe { self.raw.value.v_obj })
        } else {
            None
        }
    }

    /// A new strong reference to the held object.
    #[inline]
    pub fn as_object(&self) -> Option<ObjectRef<Object>> {
        let p = self.as_object_ptr()?;
        // SAFETY: live for 'a; we take our own reference.
        Some(unsafe { ObjectRef::from_raw_borrowed(NonNull::new(p as *mut Object)?) })
    }

    /// A new strong reference to the held object if it is a `T`.
    #[inline]
    pub fn as_object_of<T: ObjectType>(&self) -> Option<ObjectRef<T>> {
        let r = self.as_object_ref_of::<T>()?;
        // SAFETY: a live object of type T; we take our own reference.
        Some(unsafe { ObjectRef::from_raw_borrowed(NonNull::from(r)) })
    }

    /// The held object if it is a `T`, borrowed for the view's lifetime: no reference is
    /// taken (a view keeps its object alive for `'a`).
    #[inline]
    pub fn as_object_ref_of<T: ObjectType>(&self) -> Option<&'a T> {
        let p = self.as_object_ptr()?;
        if p.is_null() {
            return None;
        }
        // SAFETY: object views point at live objects, alive for 'a.
        if !T::is_instance(unsafe { (*p).type_index }) {
            return None;
        }
        // SAFETY: type checked above; the object outlives 'a.
        Some(unsafe { &*(p as *const T) })
    }

    /// A data type value.
    #[inline]
    pub fn as_dtype(&self) -> Option<DLDataType> {
        if self.raw.type_index != kTVMFFIDataType {
            return None;
        }
        // SAFETY: DataType stores v_dtype.
        Some(unsafe { self.raw.value.v_dtype })
    }

    /// A device value.
    #[inline]
    pub fn as_device(&self) -> Option<DLDevice> {
        if self.raw.type_index != kTVMFFIDevice {
            return None;
        }
        // SAFETY: Device stores v_device.
        Some(unsafe { self.raw.value.v_device })
    }

    /// An opaque pointer (OpaquePtr, or NULL for None).
    #[inline]
    pub fn as_opaque_ptr(&self) -> Option<*mut c_void> {
        match self.raw.type_index {
            // SAFETY: OpaquePtr stores v_ptr.
            kTVMFFIOpaquePtr => Some(unsafe { self.raw.value.v_ptr }),
            kTVMFFINone => Some(std::ptr::null_mut()),
            _ => None,
        }
    }
}

impl<'a, T: ObjectType> From<&'a ObjectRef<T>> for AnyView<'a> {
    #[inline]
    fn from(obj: &'a ObjectRef<T>) -> Self {
        AnyView {
            raw: TVMFFIAny {
                type_index: obj.type_index(),
                small_str_len: 0,
                value: TVMFFIAnyValue {
                    v_obj: obj.as_raw(),
                },
            },
            _borrow: PhantomData,
        }
    }
}

impl<'a> From<&'a Any> for AnyView<'a> {
    #[inline]
    fn from(a: &'a Any) -> Self {
        a.as_view()
    }
}

macro_rules! pod_view {
    ($t:ty, $ti:expr, |$v:ident| $val:expr) => {
        impl From<$t> for AnyView<'static> {
            #[inline]
            fn from($v: $t) -> Self {
                AnyView {
                    raw: TVMFFIAny {
                        type_index: $ti,
                        small_str_len: 0,
                        value: $val,
                    },
                    _borrow: PhantomData,
                }
            }
        }
        impl From<$t> for Any {
            #[inline]
            fn from($v: $t) -> Self {
                Any(TVMFFIAny {
                    type_index: $ti,
                    small_str_len: 0,
                    value: $val,
                })
            }
        }
    };
}

pod_view!(i64, kTVMFFIInt, |v| TVMFFIAnyValue { v_int64: v });
pod_view!(i32, kTVMFFIInt, |v| TVMFFIAnyValue { v_int64: v as i64 });
pod_view!(u32, kTVMFFIInt, |v| TVMFFIAnyValue { v_int64: v as i64 });
// An Int is an int64: a `usize` above `i64::MAX` wraps to a negative value, as the C++
// `static_cast` does (`get::<usize>()` then refuses it, naming the value).
pod_view!(usize, kTVMFFIInt, |v| TVMFFIAnyValue { v_int64: v as i64 });
pod_view!(bool, kTVMFFIBool, |v| TVMFFIAnyValue { v_int64: v as i64 });
pod_view!(f64, kTVMFFIFloat, |v| TVMFFIAnyValue { v_float64: v });
pod_view!(f32, kTVMFFIFloat, |v| TVMFFIAnyValue {
    v_float64: v as f64
});
pod_view!(DLDevice, kTVMFFIDevice, |v| TVMFFIAnyValue { v_device: v });
pod_view!(*mut c_void, kTVMFFIOpaquePtr, |v| TVMFFIAnyValue {
    v_ptr: v
});

impl<'a> AnyView<'a> {
    /// A `DLTensor*` view (type index 7), as C callers pass borrowed tensors.
    ///
    /// # Safety
    /// `t` must be NULL or point at a valid `DLTensor` (shape, strides and data included) that
    /// stays alive and unchanged for `'a`: consumers (the runtime's functions and ops)
    /// dereference it.
    #[inline]
    pub unsafe fn from_dltensor_ptr(t: *mut DLTensor) -> AnyView<'a> {
        AnyView {
            raw: TVMFFIAny {
                type_index: kTVMFFIDLTensorPtr,
                small_str_len: 0,
                value: TVMFFIAnyValue {
                    v_ptr: t as *mut c_void,
                },
            },
            _borrow: PhantomData,
        }
    }
}

impl From<DLDataType> for AnyView<'static> {
    #[inline]
    fn from(v: DLDataType) -> Self {
        let mut value = TVMFFIAnyValue { v_uint64: 0 };
        value.v_dtype = v;
        AnyView {
            raw: TVMFFIAny {
                type_index: kTVMFFIDataType,
                small_str_len: 0,
                value,
            },
            _borrow: PhantomData,
        }
    }
}

impl From<DLDataType> for Any {
    #[inline]
    fn from(v: DLDataType) -> Self {
        Any(AnyView::from(v).raw)
    }
}

impl From<()> for Any {
    #[inline]
    fn from(_: ()) -> Self {
        Any::none()
    }
}

impl From<&str> for Any {
    #[inline]
    fn from(s: &str) -> Self {
        Any(StrObj::any_from(s.as_bytes()))
    }
}

impl From<String> for Any {
    #[inline]
    fn from(s: String) -> Self {
        Any::from(s.as_str())
    }
}

impl From<&[u8]> for Any {
    /// Bytes (not a string).
    #[inline]
    fn from(b: &[u8]) -> Self {
        Any(BytesObj::any_from(b))
    }
}

impl<T: ObjectType> From<ObjectRef<T>> for Any {
    #[inline]
    fn from(obj: ObjectRef<T>) -> Self {
        Any::from_object(obj)
    }
}

impl<T: Into<Any>> From<Option<T>> for Any {
    #[inline]
    fn from(v: Option<T>) -> Self {
        v.map_or_else(Any::none, Into::into)
    }
}

/// Conversion out of a borrowed value; `None` means "not this type" (the caller reports a
/// TypeError naming `TYPE_NAME` and the value's type).
pub trait FromAny: Sized {
    /// The type name used in messages and type schemas.
    const TYPE_NAME: &'static str;
    /// Converts, or `None` when the value has another type.
    fn try_from_view(v: &AnyView<'_>) -> Option<Self>;
    /// The type schema JSON of this type (`{"type":"int"}`).
    fn schema() -> String {
        format!("{{\"type\":\"{}\"}}", Self::TYPE_NAME)
    }
    /// Why a value that `try_from_view` refused cannot convert although its type is the right
    /// kind (`TYPE_NAME` alone would read "expected int, got int"); None when its type is the
    /// reason.
    fn refusal(v: &AnyView<'_>) -> Option<String> {
        let _ = v;
        None
    }
}

/// `refusal` of the integer types narrower than int64.
fn out_of_range<T>(v: &AnyView<'_>) -> Option<String> {
    v.as_i64()
        .map(|x| format!("{x} is out of range for {}", std::any::type_name::<T>()))
}

/// `refusal` of the string conversions: a string whose bytes are not UTF-8.
fn not_utf8(v: &AnyView<'_>) -> Option<String> {
    (matches!(v.type_index(), kTVMFFISmallStr | kTVMFFIStr | kTVMFFIRawStr) && v.as_str().is_none())
        .then(|| "a string that is not valid UTF-8".to_owned())
}

impl FromAny for i64 {
    const TYPE_NAME: &'static str = "int";
    #[inline]
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        v.as_i64()
    }
}

impl FromAny for i32 {
    const TYPE_NAME: &'static str = "int";
    #[inline]
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        v.as_i64().and_then(|x| i32::try_from(x).ok())
    }
    fn refusal(v: &AnyView<'_>) -> Option<String> {
        out_of_range::<Self>(v)
    }
}

impl FromAny for usize {
    const TYPE_NAME: &'static str = "int";
    #[inline]
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        v.as_i64().and_then(|x| usize::try_from(x).ok())
    }
    fn refusal(v: &AnyView<'_>) -> Option<String> {
        out_of_range::<Self>(v)
    }
}

impl FromAny for f64 {
    const TYPE_NAME: &'static str = "float";
    #[inline]
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        v.as_f64()
    }
}

impl FromAny for f32 {
    const TYPE_NAME: &'static str = "float";
    #[inline]
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        v.as_f64().map(|x| x as f32)
    }
}

impl FromAny for bool {
    const TYPE_NAME: &'static str = "bool";
    #[inline]
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        v.as_bool()
    }
}

impl FromAny for String {
    const TYPE_NAME: &'static str = "ffi.String";
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        v.as_str().map(str::to_owned)
    }
    fn refusal(v: &AnyView<'_>) -> Option<String> {
        not_utf8(v)
    }
}

impl FromAny for Vec<u8> {
    const TYPE_NAME: &'static str = "ffi.Bytes";
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        v.as_bytes().map(<[u8]>::to_vec)
    }
}

impl FromAny for DLDataType {
    const TYPE_NAME: &'static str = "DataType";
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        // Strings are accepted as dtypes, as in the official library.
        v.as_dtype()
            .or_else(|| v.as_str().and_then(|s| crate::dtype::parse_dtype(s).ok()))
    }
}

impl FromAny for DLDevice {
    const TYPE_NAME: &'static str = "Device";
    #[inline]
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        v.as_device()
    }
}

impl FromAny for *mut c_void {
    const TYPE_NAME: &'static str = "void*";
    #[inline]
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        v.as_opaque_ptr()
    }
}

impl FromAny for Any {
    const TYPE_NAME: &'static str = "Any";
    #[inline]
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        v.to_owned().ok()
    }
}

impl<T: ObjectType> FromAny for ObjectRef<T> {
    const TYPE_NAME: &'static str = T::TYPE_KEY;
    #[inline]
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        v.as_object_of::<T>()
    }
}

impl<T: FromAny> FromAny for Option<T> {
    const TYPE_NAME: &'static str = T::TYPE_NAME;
    #[inline]
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        if v.is_none() {
            Some(None)
        } else {
            T::try_from_view(v).map(Some)
        }
    }
    fn refusal(v: &AnyView<'_>) -> Option<String> {
        T::refusal(v)
    }
    fn schema() -> String {
        format!("{{\"type\":\"Optional\",\"args\":[{}]}}", T::schema())
    }
}

impl fmt::Debug for AnyView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.raw.type_index {
            kTVMFFINone => write!(f, "None"),
            kTVMFFIInt => write!(f, "{}", self.as_i64().unwrap()),
            kTVMFFIBool => write!(f, "{}", self.as_bool().unwrap()),
            kTVMFFIFloat => write!(f, "{}", self.as_f64().unwrap()),
            kTVMFFIDataType => write!(
                f,
                "{}",
                crate::dtype::dtype_to_string(self.as_dtype().unwrap())
            ),
            kTVMFFIDevice => write!(f, "{:?}", self.as_device().unwrap()),
            kTVMFFISmallStr | kTVMFFIStr | kTVMFFIRawStr => match self.as_str() {
                Some(s) => write!(f, "{s:?}"),
                None => write!(f, "<non-UTF-8 string>"),
            },
            _ => write!(f, "<{}>", self.type_key()),
        }
    }
}

impl fmt::Debug for Any {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_view().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_round_trip() {
        assert_eq!(Any::from(42i64).get::<i64>().unwrap(), 42);
        assert_eq!(Any::from(true).get::<i64>().unwrap(), 1);
        assert_eq!(Any::from(2i64).get::<f64>().unwrap(), 2.0);
        assert!(Any::from(1.5f64).get::<i64>().is_err());
        let d = DLDevice {
            device_type: 2,
            device_id: 3,
        };
        assert_eq!(Any::from(d).get::<DLDevice>().unwrap(), d);
        let t = DLDataType {
            code: 2,
            bits: 32,
            lanes: 1,
        };
        let a = Any::from(t);
        // SAFETY: checking the padding of the raw value.
        assert_eq!(
            unsafe { a.raw().value.v_uint64 } >> 32,
            0,
            "unused bytes are zero"
        );
        assert_eq!(a.get::<DLDataType>().unwrap(), t);
    }

    #[test]
    fn type_error_names_both_types() {
        let e = Any::from("hello world").get::<i64>().unwrap_err();
        assert_eq!(e.kind(), "TypeError");
        assert_eq!(e.message(), "expected int, got ffi.String");
    }

    #[test]
    fn refusals_of_the_right_type_say_why() {
        let e = Any::from(i64::MAX).get::<i32>().unwrap_err();
        assert_eq!(e.kind(), "TypeError");
        assert_eq!(
            e.message(),
            "expected int, got int (9223372036854775807 is out of range for i32)"
        );
        // a usize past i64::MAX wraps on the way in and is refused, named, on the way out
        let e = Any::from(usize::MAX).get::<usize>().unwrap_err();
        assert_eq!(
            e.message(),
            "expected int, got int (-1 is out of range for usize)"
        );
        assert_eq!(Any::from(5usize).get::<usize>().unwrap(), 5);
        for bytes in [&b"\xff\xfe"[..], &b"a longer string, then \xff"[..]] {
            let a = Any(crate::string::StrObj::any_from(bytes));
            let e = a.get::<String>().unwrap_err();
            assert!(
                e.message().ends_with("(a string that is not valid UTF-8)"),
                "{}",
                e.message()
            );
            let e = a.get::<Option<String>>().unwrap_err();
            assert!(e.message().contains("not valid UTF-8"), "{}", e.message());
        }
        // another type: only the types are named
        assert_eq!(
            Any::from("x").get::<i32>().unwrap_err().message(),
            "expected int, got ffi.String"
        );
    }

    #[test]
    fn strings_both_encodings() {
        for s in ["", "short", "a much longer string"] {
            let a = Any::from(s);
            assert_eq!(a.get::<String>().unwrap(), s);
            let c = a.clone();
            drop(a);
            assert_eq!(c.as_view().as_str(), Some(s));
        }
    }

    #[test]
    fn borrowed_object_looks_take_no_reference() {
        let shape = crate::Shape::new(&[2, 3]);
        let a = Any::from_object(shape.clone());
        let before = shape.strong_count();
        let v = a.as_view();
        let s = v.as_object_ref_of::<crate::ShapeObj>().expect("a shape");
        assert_eq!(s.as_slice(), &[2, 3]);
        assert_eq!(shape.strong_count(), before, "no reference taken");
        assert!(
            v.as_object_ref_of::<crate::StrObj>().is_none(),
            "another type"
        );
        assert!(Any::from(5i64)
            .as_view()
            .as_object_ref_of::<crate::ShapeObj>()
            .is_none());
    }

    #[test]
    fn raw_views_become_owned() {
        let c = std::ffi::CString::new("raw string value").unwrap();
        let view = TVMFFIAny {
            type_index: kTVMFFIRawStr,
            small_str_len: 0,
            value: TVMFFIAnyValue {
                v_c_str: c.as_ptr(),
            },
        };
        // SAFETY: c outlives the call.
        let owned = unsafe { Any::copy_from_raw_view(&view) }.unwrap();
        assert_eq!(owned.type_index(), kTVMFFIStr);
        assert_eq!(owned.get::<String>().unwrap(), "raw string value");
    }

    #[test]
    fn rvalue_ref_moves_once() {
        let obj = Any::from("an object string!");
        let mut slot = obj.into_object().unwrap().into_raw();
        let view = TVMFFIAny {
            type_index: kTVMFFIObjectRValueRef,
            small_str_len: 0,
            value: TVMFFIAnyValue {
                v_ptr: &mut slot as *mut _ as *mut c_void,
            },
        };
        // SAFETY: slot holds an owned reference.
        let moved = unsafe { Any::copy_from_raw_view(&view) }.unwrap();
        assert!(slot.is_null());
        assert_eq!(moved.get::<String>().unwrap(), "an object string!");
        // SAFETY: the slot is now empty.
        assert!(unsafe { Any::copy_from_raw_view(&view) }.is_err());
    }
}
