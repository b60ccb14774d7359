//! `ffi.Shape` (69): an immutable int64 array stored in place after the object (spec §2.4).

use std::ptr;

use crate::abi::{kTVMFFIShape, TVMFFIObject, TVMFFIShapeCell};
use crate::object::{new_object_with_extra, ObjectRef, ObjectType};

/// Payload of `ffi.Shape`.
#[repr(C)]
pub struct ShapeObj {
    pub header: TVMFFIObject,
    pub cell: TVMFFIShapeCell,
}

// SAFETY: repr(C), header first, fixed static index.
unsafe impl ObjectType for ShapeObj {
    const TYPE_KEY: &'static str = "ffi.Shape";
    const KEPT_WHILE_LENT: bool = false;
    #[inline]
    fn type_index() -> i32 {
        kTVMFFIShape
    }
    #[inline]
    fn is_instance(type_index: i32) -> bool {
        type_index == kTVMFFIShape
    }
}

// SAFETY: immutable after construction.
unsafe impl Send for ShapeObj {}
// SAFETY: immutable after construction.
unsafe impl Sync for ShapeObj {}

impl ShapeObj {
    /// The dimensions.
    #[inline]
    pub fn as_slice(&self) -> &[i64] {
        if self.cell.size == 0 {
            return &[];
        }
        // SAFETY: the cell describes the object's own in-place data.
        unsafe { std::slice::from_raw_parts(self.cell.data, self.cell.size) }
    }
}

/// Owning handle to an `ffi.Shape`.
pub type Shape = ObjectRef<ShapeObj>;

impl ObjectRef<ShapeObj> {
    /// A new shape holding a copy of `dims`.
    pub fn new(dims: &[i64]) -> Shape {
        let (obj, data) = Self::alloc(dims.len());
        // SAFETY: `data` holds dims.len() int64 slots owned by the new object.
        unsafe { ptr::copy_nonoverlapping(dims.as_ptr(), data, dims.len()) };
        obj
    }

    /// A new shape of `n` dimensions, dimension `i` being `dim(i)`; the first error ends it.
    /// Writes each dimension in place: no buffer, and no `memcpy` call for a few of them
    /// (`ffi.Shape(1, 2, 3)` spent a sixth of its time in one).
    ///
    /// # Panics
    /// When `n * 8` bytes overflow `usize` (as `Vec::with_capacity`).
    pub fn try_from_fn<E>(
        n: usize,
        mut dim: impl FnMut(usize) -> Result<i64, E>,
    ) -> Result<Shape, E> {
        let (obj, data) = Self::alloc(n);
        for i in 0..n {
            let d = dim(i)?;
            // SAFETY: i < n slots owned by the new object; every slot is written before the
            // shape is returned, and an early return drops a shape no one read.
            unsafe { data.add(i).write(d) };
        }
        Ok(obj)
    }

    /// A shape of `n` dimensions whose data (returned) is not yet written.
    fn alloc(n: usize) -> (Shape, *mut i64) {
        let (obj, tail) = new_object_with_extra(
            ShapeObj {
                header: TVMFFIObject::new::<ShapeObj>(),
                cell: TVMFFIShapeCell {
                    data: ptr::null(),
                    size: n,
                },
            },
            n.checked_mul(8)
                .expect("ffi.Shape: too many dimensions (size overflows usize)"),
        );
        let data = tail as *mut i64;
        // SAFETY: `tail` holds n int64 slots owned by the new object (8-byte aligned).
        unsafe { (*obj.as_ptr()).cell.data = data };
        (obj, data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_place_data() {
        let s = Shape::new(&[1, 2, 3]);
        assert_eq!(s.as_slice(), &[1, 2, 3]);
        assert_eq!(s.cell.data as usize, s.as_ptr() as usize + 40);
        assert_eq!(Shape::new(&[]).as_slice(), &[] as &[i64]);
    }
}
