//! `ffi.Tensor` (70): a DLTensor behind the object header, with DLPack import and export (legacy
//! and versioned), unsafe views, and tensors over memory owned by Rust (spec §2.4, §7.1, §7.2).
//!
//! Invariant: `strides != NULL` whenever `ndim > 0` (C++ `Tensor::strides()` checks it), so
//! compact strides are synthesised in place when a producer leaves them out.

use std::any::Any as StdAny;
use std::ffi::c_void;
use std::ptr;

use crate::abi::*;
use crate::any::{AnyView, FromAny};
use crate::error::{Error, Result};
use crate::object::{dec_ref, new_object_with_extra, Object, ObjectRef, ObjectType};

enum Owner {
    /// A legacy DLPack producer; its deleter runs when the tensor dies.
    Legacy(*mut DLManagedTensor),
    /// A versioned DLPack producer.
    Versioned(*mut DLManagedTensorVersioned),
    /// A view keeps its source object alive.
    Source(#[allow(dead_code)] ObjectRef<Object>),
    /// Memory owned by Rust (e.g. a device allocation), released by its `Drop`.
    Rust(#[allow(dead_code)] Box<dyn StdAny + Send + Sync>),
}

/// Payload of `ffi.Tensor`: header, DLTensor at offset 24, then private ownership data.
#[repr(C)]
pub struct TensorObj {
    pub header: TVMFFIObject,
    pub dl_tensor: DLTensor,
    owner: Owner,
}

// SAFETY: repr(C), header first, fixed static index.
unsafe impl ObjectType for TensorObj {
    const TYPE_KEY: &'static str = "ffi.Tensor";
    #[inline]
    fn type_index() -> i32 {
        kTVMFFITensor
    }
    #[inline]
    fn is_instance(type_index: i32) -> bool {
        type_index == kTVMFFITensor
    }
}

// SAFETY: the metadata is immutable; the data buffer is shared memory, as in every DLPack
// consumer, and producers hand ownership over to us.
unsafe impl Send for TensorObj {}
// SAFETY: as above.
unsafe impl Sync for TensorObj {}

impl Drop for TensorObj {
    fn drop(&mut self) {
        match self.owner {
            Owner::Legacy(mt) => {
                // SAFETY: we own the managed tensor since FromDLPack succeeded.
                if let Some(d) = unsafe { (*mt).deleter } {
                    // SAFETY: the producer's deleter, called exactly once.
                    unsafe { d(mt) };
                }
            }
            Owner::Versioned(mt) => {
                // SAFETY: as above.
                if let Some(d) = unsafe { (*mt).deleter } {
                    // SAFETY: as above.
                    unsafe { d(mt) };
                }
            }
            Owner::Source(_) | Owner::Rust(_) => {}
        }
    }
}

/// Owning handle to an `ffi.Tensor`.
pub type Tensor = ObjectRef<TensorObj>;

/// Number of bytes of one element (lanes included), rounded up to whole bytes.
pub fn dtype_bytes(dtype: DLDataType) -> usize {
    (dtype.bits as usize * dtype.lanes as usize).div_ceil(8)
}

/// The strides a DLPack import gives a producer's tensor without strides: the running
/// product of the sizes as they are, as the official library (and numpy) compute them, so a
/// dimension left of an empty one gets stride 0 (`compact_strides` counts empty sizes as 1).
fn import_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1].wrapping_mul(shape[i + 1]);
    }
    strides
}

/// Compact row-major strides of `shape`. Strides past `i64::MAX` saturate (no tensor that
/// large has memory: the allocating and viewing functions refuse such shapes).
pub fn compact_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1].saturating_mul(shape[i + 1].max(1));
    }
    strides
}

/// Whether `shape`/`strides` describe a compact row-major layout (size-1 dims ignored; any
/// empty dimension makes the tensor trivially contiguous). Strides of another length than
/// the shape describe no layout: false.
pub fn is_contiguous(shape: &[i64], strides: Option<&[i64]>) -> bool {
    let Some(strides) = strides else { return true };
    if strides.len() != shape.len() {
        return false;
    }
    if shape.contains(&0) {
        return true;
    }
    let mut expected = 1i64;
    for (&n, &s) in shape.iter().zip(strides).rev() {
        if n == 1 {
            continue;
        }
        if s != expected {
            return false;
        }
        expected = expected.saturating_mul(n);
    }
    true
}

/// Whether the device type addresses memory directly (so data pointers can be checked).
fn is_direct_address(device_type: i32) -> bool {
    // (every type up to CUDAHost, the invalid 0 and negative ones included, as upstream's test)
    device_type <= kDLCUDAHost || matches!(device_type, kDLCUDAManaged | kDLROCM | kDLROCMHost)
}

/// Reads the shape and strides of a DLTensor, checking the pointers the ndim requires.
///
/// # Safety
/// The DLTensor's shape/strides pointers, when non-NULL, must hold `ndim` entries.
unsafe fn dims<'a>(t: &'a DLTensor, what: &str) -> Result<(&'a [i64], Option<&'a [i64]>)> {
    if t.ndim < 0 {
        return Err(Error::value_error(format!(
            "{what}: ndim must be >= 0, got {}",
            t.ndim
        )));
    }
    let n = t.ndim as usize;
    if n == 0 {
        return Ok((&[], None));
    }
    if t.shape.is_null() {
        return Err(Error::value_error(format!(
            "{what}: shape is NULL while ndim = {n}"
        )));
    }
    // SAFETY: per the caller.
    let shape = unsafe { std::slice::from_raw_parts(t.shape, n) };
    // SAFETY: per the caller.
    let strides =
        (!t.strides.is_null()).then(|| unsafe { std::slice::from_raw_parts(t.strides, n) });
    Ok((shape, strides))
}

fn check_dlpack(t: &DLTensor, require_alignment: i32, require_contiguous: bool) -> Result<()> {
    // SAFETY: a producer's DLTensor describes valid shape/strides arrays.
    let (shape, strides) = unsafe { dims(t, "FromDLPack") }?;
    if require_alignment < 0 {
        // the official library reads it as a huge unsigned alignment, which nothing meets
        return Err(Error::value_error(format!(
            "FromDLPack: `require_alignment` must be >= 0 (0: no requirement), got {require_alignment}"
        )));
    }
    if require_alignment > 0 {
        let align = require_alignment as u64;
        let addr = if is_direct_address(t.device.device_type) {
            (t.data as u64).wrapping_add(t.byte_offset)
        } else {
            t.byte_offset
        };
        if addr % align != 0 {
            return Err(Error::runtime_error(format!(
                "FromDLPack: Data is not aligned to {require_alignment} bytes."
            )));
        }
    }
    if require_contiguous && !is_contiguous(shape, strides) {
        return Err(Error::runtime_error(
            "FromDLPack: Tensor is not contiguous.",
        ));
    }
    Ok(())
}

/// Builds a tensor object around `dl`, copying shape (if `copy_shape`) and strides (or
/// synthesising compact ones) into the object itself.
fn build(dl: DLTensor, owner: Owner, copy_shape: bool) -> Tensor {
    let n = dl.ndim.max(0) as usize;
    // SAFETY: callers validated the arrays with `dims`.
    let (shape, strides) = unsafe { dims(&dl, "Tensor") }.unwrap_or((&[], None));
    let need_strides = n > 0 && (strides.is_none() || copy_shape);
    let slots = if copy_shape { n } else { 0 } + if need_strides { n } else { 0 };
    let synthesized = if need_strides {
        Some(match strides {
            Some(s) => s.to_vec(),
            None => import_strides(shape),
        })
    } else {
        None
    };
    let shape_copy = copy_shape.then(|| shape.to_vec());
    let (obj, tail) = new_object_with_extra(
        TensorObj {
            header: TVMFFIObject::new::<TensorObj>(),
            dl_tensor: dl,
            owner,
        },
        slots * 8,
    );
    let mut cursor = tail as *mut i64;
    // SAFETY: the tail has `slots` int64 entries owned by the object; we fill them and point
    // the DLTensor at them.
    unsafe {
        let t = &mut (*obj.as_ptr()).dl_tensor;
        if let Some(s) = shape_copy {
            ptr::copy_nonoverlapping(s.as_ptr(), cursor, n);
            t.shape = if n == 0 { ptr::null_mut() } else { cursor };
            cursor = cursor.add(n);
            if n == 0 {
                // nothing of the caller's arrays may stay behind: a 0-d view has no strides
                t.strides = ptr::null_mut();
            }
        }
        if let Some(s) = synthesized {
            ptr::copy_nonoverlapping(s.as_ptr(), cursor, n);
            t.strides = cursor;
        }
    }
    obj
}

impl ObjectRef<TensorObj> {
    /// `TVMFFITensorFromDLPack`: adopts `mt` on success; on failure ownership stays with the
    /// caller and its deleter is not called.
    ///
    /// # Safety
    /// `mt` must be a valid managed tensor.
    pub unsafe fn from_dlpack(
        mt: *mut DLManagedTensor,
        require_alignment: i32,
        require_contiguous: bool,
    ) -> Result<Tensor> {
        if mt.is_null() {
            return Err(Error::value_error(
                "TVMFFITensorFromDLPack: `managed_tensor` is NULL",
            ));
        }
        // SAFETY: per the caller.
        let dl = unsafe { (*mt).dl_tensor };
        check_dlpack(&dl, require_alignment, require_contiguous)?;
        Ok(build(dl, Owner::Legacy(mt), false))
    }

    /// `TVMFFITensorFromDLPackVersioned`.
    ///
    /// # Safety
    /// `mt` must be a valid versioned managed tensor.
    pub unsafe fn from_dlpack_versioned(
        mt: *mut DLManagedTensorVersioned,
        require_alignment: i32,
        require_contiguous: bool,
    ) -> Result<Tensor> {
        if mt.is_null() {
            return Err(Error::value_error(
                "TVMFFITensorFromDLPackVersioned: `managed_tensor` is NULL",
            ));
        }
        // SAFETY: per the caller.
        let (dl, flags, version) = unsafe { ((*mt).dl_tensor, (*mt).flags, (*mt).version) };
        if version.major > DLPACK_MAJOR_VERSION {
            return Err(Error::runtime_error(format!(
                "FromDLPack: DLPack major version {} is newer than the supported {}",
                version.major, DLPACK_MAJOR_VERSION
            )));
        }
        // (alignment and contiguity first, then the flag, in the official order and words)
        check_dlpack(&dl, require_alignment, require_contiguous)?;
        if flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED != 0 {
            return Err(Error::runtime_error(
                "Subbyte type padded is not yet supported",
            ));
        }
        Ok(build(dl, Owner::Versioned(mt), false))
    }

    /// `TVMFFITensorCreateUnsafeView`: a tensor with `prototype`'s metadata (data and byte
    /// offset included) that keeps `source` alive.
    ///
    /// # Safety
    /// `prototype` must describe valid shape/strides arrays.
    pub unsafe fn unsafe_view(source: ObjectRef<Object>, prototype: &DLTensor) -> Result<Tensor> {
        // SAFETY: per the caller.
        let (_, strides) = unsafe { dims(prototype, "TVMFFITensorCreateUnsafeView") }?;
        if prototype.ndim > 0 && strides.is_none() {
            return Err(Error::value_error(
                "TVMFFITensorCreateUnsafeView: `prototype->strides` must not be NULL",
            ));
        }
        Ok(build(*prototype, Owner::Source(source), true))
    }

    /// A tensor over memory that `owner` keeps alive (dropped when the tensor dies).
    ///
    /// # Safety
    /// `data + byte_offset` must address, on `device`, every element that `shape`/`strides`
    /// (compact when `None`) and `dtype` describe, for as long as `owner` lives. Every consumer
    /// of tensors (the runtime's functions and ops, DLPack importers) trusts this metadata.
    pub unsafe fn from_owned_memory(
        data: *mut c_void,
        device: DLDevice,
        dtype: DLDataType,
        shape: &[i64],
        strides: Option<&[i64]>,
        byte_offset: u64,
        owner: Box<dyn StdAny + Send + Sync>,
    ) -> Tensor {
        let dl = DLTensor {
            data,
            device,
            ndim: shape.len() as i32,
            dtype,
            shape: shape.as_ptr() as *mut i64,
            strides: strides.map_or(ptr::null_mut(), |s| s.as_ptr() as *mut i64),
            byte_offset,
        };
        build(dl, Owner::Rust(owner), true)
    }

    /// A view of `self` with other metadata (same storage, kept alive by the view). A view of a
    /// view holds what the first view holds, not the view itself (shape and strides are copied
    /// into the new object), so `x = view_of(x)` in a loop keeps no chain of intermediate views
    /// alive and releasing the last view does not recurse once per link (which overflowed the
    /// stack after ~10^5 links).
    ///
    /// # Safety
    /// Every element the new `data`/`shape`/`strides`/`byte_offset` describe must lie in the
    /// storage `self` keeps alive.
    pub unsafe fn view_with(
        &self,
        data: *mut c_void,
        shape: &[i64],
        strides: &[i64],
        byte_offset: u64,
    ) -> Tensor {
        let source = match &self.owner {
            Owner::Source(s) => s.clone(),
            _ => self.clone().upcast(),
        };
        let dl = DLTensor {
            data,
            device: self.dl_tensor.device,
            ndim: shape.len() as i32,
            dtype: self.dl_tensor.dtype,
            shape: shape.as_ptr() as *mut i64,
            strides: strides.as_ptr() as *mut i64,
            byte_offset,
        };
        build(dl, Owner::Source(source), true)
    }

    /// `TVMFFITensorToDLPack`: a new managed tensor that holds a reference to `self`.
    pub fn to_dlpack(&self) -> *mut DLManagedTensor {
        Box::into_raw(Box::new(DLManagedTensor {
            dl_tensor: self.dl_tensor,
            manager_ctx: self.clone().into_raw() as *mut c_void,
            deleter: Some(delete_managed),
        }))
    }

    /// `TVMFFITensorToDLPackVersioned`.
    pub fn to_dlpack_versioned(&self) -> *mut DLManagedTensorVersioned {
        Box::into_raw(Box::new(DLManagedTensorVersioned {
            version: DLPackVersion {
                major: DLPACK_MAJOR_VERSION,
                minor: DLPACK_MINOR_VERSION,
            },
            manager_ctx: self.clone().into_raw() as *mut c_void,
            deleter: Some(delete_managed_versioned),
            flags: if self.is_read_only() {
                DLPACK_FLAG_BITMASK_READ_ONLY
            } else {
                0
            },
            dl_tensor: self.dl_tensor,
        }))
    }
}

unsafe extern "C" fn delete_managed(mt: *mut DLManagedTensor) {
    if mt.is_null() {
        return;
    }
    // SAFETY: created by `to_dlpack` with Box; manager_ctx holds our tensor reference.
    let b = unsafe { Box::from_raw(mt) };
    // SAFETY: as above.
    unsafe { dec_ref(b.manager_ctx as *mut TVMFFIObject) };
}

unsafe extern "C" fn delete_managed_versioned(mt: *mut DLManagedTensorVersioned) {
    if mt.is_null() {
        return;
    }
    // SAFETY: created by `to_dlpack_versioned` with Box.
    let b = unsafe { Box::from_raw(mt) };
    // SAFETY: as above.
    unsafe { dec_ref(b.manager_ctx as *mut TVMFFIObject) };
}

impl TensorObj {
    /// Whether the memory is read-only: imported from a versioned DLPack producer that set
    /// `DLPACK_FLAG_BITMASK_READ_ONLY` (a read-only numpy array or memory map), or a view of
    /// such a tensor. An `ffi.Tensor` has no flag of its own in the official layout, so the
    /// import's managed tensor is the record; every binding sees it (`AnyFFITensorIsReadOnly`),
    /// the ops and `runtime.copy_` refuse such an output, and versioned exports carry the flag.
    pub fn is_read_only(&self) -> bool {
        let mut t: &TensorObj = self;
        loop {
            match &t.owner {
                Owner::Versioned(mt) => {
                    // SAFETY: the managed tensor is ours until the tensor dies.
                    let flags = unsafe { (**mt).flags };
                    return flags & DLPACK_FLAG_BITMASK_READ_ONLY != 0;
                }
                Owner::Source(s) if s.type_index() == kTVMFFITensor => {
                    // SAFETY: a live ffi.Tensor, kept by `t`, which `self` keeps.
                    t = unsafe { &*(s.as_ptr() as *const TensorObj) };
                }
                _ => return false,
            }
        }
    }

    /// The dimensions.
    #[inline]
    pub fn shape(&self) -> &[i64] {
        let n = self.dl_tensor.ndim.max(0) as usize;
        if n == 0 {
            return &[];
        }
        // SAFETY: validated at construction; owned by us or the producer we keep alive.
        unsafe { std::slice::from_raw_parts(self.dl_tensor.shape, n) }
    }

    /// The strides in elements (never missing).
    #[inline]
    pub fn strides(&self) -> &[i64] {
        let n = self.dl_tensor.ndim.max(0) as usize;
        if n == 0 {
            return &[];
        }
        // SAFETY: non-NULL by the invariant of this type.
        unsafe { std::slice::from_raw_parts(self.dl_tensor.strides, n) }
    }

    /// Number of elements.
    pub fn numel(&self) -> i64 {
        self.shape().iter().product()
    }

    /// Whether the layout is compact row-major.
    pub fn is_contiguous(&self) -> bool {
        is_contiguous(self.shape(), Some(self.strides()))
    }
}

/// A tensor argument: an `ffi.Tensor` object or a borrowed `DLTensor*` view (type 7).
#[derive(Clone, Copy, Debug)]
pub struct DLTensorArg(pub *mut DLTensor);

impl AnyView<'_> {
    /// The DLTensor of a Tensor object or a DLTensorPtr view.
    #[inline]
    pub fn as_dltensor_ptr(&self) -> Option<*mut DLTensor> {
        match self.type_index() {
            kTVMFFIDLTensorPtr => {
                // SAFETY: DLTensorPtr stores v_ptr.
                let p = unsafe { self.raw().value.v_ptr } as *mut DLTensor;
                (!p.is_null()).then_some(p)
            }
            kTVMFFITensor => {
                // SAFETY: Tensor objects carry their DLTensor right after the header.
                let obj = unsafe { self.raw().value.v_obj } as *mut TensorObj;
                // SAFETY: as above.
                Some(unsafe { ptr::addr_of_mut!((*obj).dl_tensor) })
            }
            _ => None,
        }
    }
}

impl FromAny for DLTensorArg {
    const TYPE_NAME: &'static str = "ffi.Tensor";
    #[inline]
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        v.as_dltensor_ptr().map(DLTensorArg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static DELETED: AtomicUsize = AtomicUsize::new(0);

    unsafe extern "C" fn count_delete(mt: *mut DLManagedTensor) {
        DELETED.fetch_add(1, Ordering::SeqCst);
        // SAFETY: created with Box in the test.
        drop(unsafe { Box::from_raw(mt) });
    }

    /// A compact (NULL-strides) f32 CPU DLTensor over `data` with `shape`.
    fn compact_f32(data: &mut [f32], shape: &mut [i64]) -> DLTensor {
        DLTensor {
            data: data.as_mut_ptr() as *mut c_void,
            device: DLDevice {
                device_type: kDLCPU,
                device_id: 0,
            },
            ndim: shape.len() as i32,
            dtype: DLDataType {
                code: kDLFloat,
                bits: 32,
                lanes: 1,
            },
            shape: shape.as_mut_ptr(),
            strides: ptr::null_mut(),
            byte_offset: 0,
        }
    }

    #[test]
    fn from_dlpack_synthesises_strides_and_owns() {
        let mut data = vec![0f32; 24];
        let mut shape = vec![2i64, 3, 4];
        let mt = Box::into_raw(Box::new(DLManagedTensor {
            dl_tensor: compact_f32(&mut data, &mut shape),
            manager_ctx: ptr::null_mut(),
            deleter: Some(count_delete),
        }));
        let before = DELETED.load(Ordering::SeqCst);
        // SAFETY: mt is valid.
        let t = unsafe { Tensor::from_dlpack(mt, 4, true) }.unwrap();
        assert_eq!(t.strides(), &[12, 4, 1]);
        let back = t.to_dlpack();
        drop(t);
        assert_eq!(
            DELETED.load(Ordering::SeqCst),
            before,
            "the exported capsule keeps it alive"
        );
        // SAFETY: our own deleter.
        unsafe { (*back).deleter.unwrap()(back) };
        assert_eq!(DELETED.load(Ordering::SeqCst), before + 1);
    }

    unsafe extern "C" fn free_versioned(mt: *mut DLManagedTensorVersioned) {
        // SAFETY: created with Box in the test.
        drop(unsafe { Box::from_raw(mt) });
    }

    #[test]
    fn a_read_only_import_stays_read_only_in_views_and_exports() {
        let mut data = vec![0f32; 6];
        let mut shape = vec![6i64];
        let import = |data: &mut Vec<f32>, shape: &mut Vec<i64>, flags: u64| {
            let mt = Box::into_raw(Box::new(DLManagedTensorVersioned {
                version: DLPackVersion { major: 1, minor: 0 },
                manager_ctx: ptr::null_mut(),
                deleter: Some(free_versioned),
                flags,
                dl_tensor: compact_f32(data, shape),
            }));
            // SAFETY: mt is valid.
            unsafe { Tensor::from_dlpack_versioned(mt, 0, false) }.unwrap()
        };
        let ro = import(&mut data, &mut shape, DLPACK_FLAG_BITMASK_READ_ONLY);
        assert!(ro.is_read_only());
        // SAFETY: the same storage, fewer elements.
        let view = unsafe { ro.view_with(ro.dl_tensor.data, &[2, 3], &[3, 1], 0) };
        // SAFETY: likewise.
        let view2 = unsafe { view.view_with(view.dl_tensor.data, &[3], &[1], 0) };
        assert!(view.is_read_only() && view2.is_read_only());
        // SAFETY: a view over `ro`'s storage, kept alive by it.
        let unsafe_view =
            unsafe { Tensor::unsafe_view(view2.clone().upcast(), &view2.dl_tensor) }.unwrap();
        assert!(unsafe_view.is_read_only());
        let out = ro.to_dlpack_versioned();
        // SAFETY: our own export, released once.
        unsafe {
            assert_eq!(
                (*out).flags & DLPACK_FLAG_BITMASK_READ_ONLY,
                DLPACK_FLAG_BITMASK_READ_ONLY
            );
            (*out).deleter.unwrap()(out);
        }
        let rw = import(&mut data, &mut shape, 0);
        assert!(!rw.is_read_only());
        let out = rw.to_dlpack_versioned();
        // SAFETY: as above.
        unsafe {
            assert_eq!((*out).flags, 0);
            (*out).deleter.unwrap()(out);
        }
    }

    #[test]
    fn contiguity_rules() {
        assert!(is_contiguous(&[2, 3], Some(&[3, 1])));
        assert!(!is_contiguous(&[2, 3], Some(&[1, 2])));
        assert!(
            is_contiguous(&[2, 1, 3], Some(&[3, 100, 1])),
            "size-1 dims are ignored"
        );
        assert!(
            is_contiguous(&[2, 0, 3], Some(&[7, 7, 7])),
            "empty tensors are contiguous"
        );
        assert_eq!(compact_strides(&[2, 3, 4]), vec![12, 4, 1]);
    }
}
