//! `ffi.OpaquePyObject` (74): a foreign handle with the creator's deleter
//! (`TVMFFIObjectCreateOpaque`).

use std::ffi::c_void;

use crate::abi::{kTVMFFIOpaquePyObject, TVMFFIObject, TVMFFIOpaqueObjectCell};
use crate::object::{new_object, ObjectRef, ObjectType};

/// Payload of an opaque object: the public cell, then the deleter that releases `handle`.
#[repr(C)]
pub struct OpaqueObj {
    pub header: TVMFFIObject,
    pub cell: TVMFFIOpaqueObjectCell,
    deleter: Option<unsafe extern "C" fn(*mut c_void)>,
}

// SAFETY: repr(C), header first, fixed static index.
unsafe impl ObjectType for OpaqueObj {
    const TYPE_KEY: &'static str = "ffi.OpaquePyObject";
    #[inline]
    fn type_index() -> i32 {
        kTVMFFIOpaquePyObject
    }
    #[inline]
    fn is_instance(type_index: i32) -> bool {
        type_index == kTVMFFIOpaquePyObject
    }
}

// SAFETY: the creator hands the handle over for shared use; we only pass it back.
unsafe impl Send for OpaqueObj {}
// SAFETY: as above.
unsafe impl Sync for OpaqueObj {}

impl Drop for OpaqueObj {
    fn drop(&mut self) {
        if let Some(d) = self.deleter {
            // SAFETY: the creator asked for `deleter(handle)` on destruction.
            unsafe { d(self.cell.handle) };
        }
    }
}

/// Owning handle to an opaque object.
pub type Opaque = ObjectRef<OpaqueObj>;

impl ObjectRef<OpaqueObj> {
    /// Wraps `handle`; `deleter(handle)` runs when the object is destroyed.
    ///
    /// # Safety
    /// `deleter`, if any, must accept `handle` exactly once, from any thread.
    pub unsafe fn new(
        handle: *mut c_void,
        deleter: Option<unsafe extern "C" fn(*mut c_void)>,
    ) -> Opaque {
        new_object(OpaqueObj {
            header: TVMFFIObject::new::<OpaqueObj>(),
            cell: TVMFFIOpaqueObjectCell { handle },
            deleter,
        })
    }
}
