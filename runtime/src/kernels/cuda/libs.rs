//! NVRTC and cuBLAS, loaded at run time by this module rather than through cudarc's loaders,
//! whose candidate sonames stop at CUDA 12 (the `nvidia-*-cu13` wheels and CUDA 13 toolkits
//! ship `libnvrtc.so.13` and `libcublas.so.13` only) and which panic when nothing loads.
//!
//! Each library is the one named by its variable (`ANYFFI_NVRTC_LIBRARY`,
//! `ANYFFI_CUBLAS_LIBRARY`: a path, any version), else the first of the unversioned name and
//! the sonames of CUDA 13, 12 and 11 that `dlopen` finds. Only the few functions the kernels
//! use are looked up; statuses come back as plain ints (a newer library may return codes that
//! an enum of older bindings does not have), and enum arguments go as their C values.

#![warn(clippy::undocumented_unsafe_blocks)]

use std::ffi::{c_char, c_int, c_void};
use std::sync::LazyLock;

use libloading::Library;

/// `nvrtcProgram`.
pub type Program = *mut c_void;
/// `cublasHandle_t`.
pub type BlasHandle = *mut c_void;

/// `NVRTC_SUCCESS`, `CUBLAS_STATUS_SUCCESS`.
pub const SUCCESS: c_int = 0;
/// `cublasOperation_t`.
pub const CUBLAS_OP_N: c_int = 0;
pub const CUBLAS_OP_T: c_int = 1;
/// `cudaDataType`.
pub const CUDA_R_32F: c_int = 0;
pub const CUDA_R_16F: c_int = 2;
pub const CUDA_R_16BF: c_int = 14;
/// `cublasComputeType_t`.
pub const CUBLAS_COMPUTE_32F: c_int = 68;
/// `cublasGemmAlgo_t`.
pub const CUBLAS_GEMM_DEFAULT: c_int = -1;

/// The message when no NVRTC library loads.
pub const NO_NVRTC: &str = "the NVRTC library was not found (libnvrtc.so, libnvrtc.so.13 or \
     libnvrtc.so.12: install the CUDA toolkit's NVRTC, e.g. `pip install nvidia-cuda-nvrtc-cu12`, \
     and add its lib directory to LD_LIBRARY_PATH, or set ANYFFI_NVRTC_LIBRARY to the library's \
     path)";

/// The message when no cuBLAS library loads.
pub const NO_CUBLAS: &str = "the cuBLAS library was not found (libcublas.so, libcublas.so.13 \
     or libcublas.so.12: install the CUDA toolkit's cuBLAS, e.g. `pip install \
     nvidia-cublas-cu12`, and add its lib directory to LD_LIBRARY_PATH, or set \
     ANYFFI_CUBLAS_LIBRARY to the library's path)";

/// The library at `path` (the value of the variable `var`) when it is set, else the first of
/// `names` that loads, else `missing`.
fn open(
    var: &str,
    path: Option<std::ffi::OsString>,
    names: &[&str],
    missing: &str,
) -> Result<Library, String> {
    if let Some(path) = path {
        // SAFETY: loading an NVIDIA library runs only its initialisers, which have no
        // preconditions.
        return unsafe { Library::new(&path) }
            .map_err(|e| format!("{var}={} could not be loaded: {e}", path.to_string_lossy()));
    }
    for name in names {
        // SAFETY: as above.
        if let Ok(lib) = unsafe { Library::new(*name) } {
            return Ok(lib);
        }
    }
    Err(missing.to_string())
}

/// The function `name` (NUL-terminated) of `lib` as a `T` (a function pointer type matching
/// its C declaration), or why not.
///
/// # Safety
/// `T` must be the function's type; the pointer is valid while `lib` stays loaded.
unsafe fn sym<T: Copy>(lib: &Library, name: &[u8], what: &str) -> Result<T, String> {
    // SAFETY: per the contract.
    unsafe { lib.get::<T>(name) }.map(|s| *s).map_err(|e| {
        format!(
            "the {what} library lacks {}: {e}",
            String::from_utf8_lossy(&name[..name.len() - 1])
        )
    })
}

/// The NVRTC functions the kernels use.
pub struct Nvrtc {
    pub version: unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int,
    pub get_num_supported_archs: unsafe extern "C" fn(*mut c_int) -> c_int,
    pub get_supported_archs: unsafe extern "C" fn(*mut c_int) -> c_int,
    pub create_program: unsafe extern "C" fn(
        *mut Program,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> c_int,
    pub destroy_program: unsafe extern "C" fn(*mut Program) -> c_int,
    pub compile_program: unsafe extern "C" fn(Program, c_int, *const *const c_char) -> c_int,
    pub get_program_log_size: unsafe extern "C" fn(Program, *mut usize) -> c_int,
    pub get_program_log: unsafe extern "C" fn(Program, *mut c_char) -> c_int,
    pub get_ptx_size: unsafe extern "C" fn(Program, *mut usize) -> c_int,
    pub get_ptx: unsafe extern "C" fn(Program, *mut c_char) -> c_int,
    pub get_cubin_size: unsafe extern "C" fn(Program, *mut usize) -> c_int,
    pub get_cubin: unsafe extern "C" fn(Program, *mut c_char) -> c_int,
    pub get_error_string: unsafe extern "C" fn(c_int) -> *const c_char,
    /// Keeps the functions above loaded (the static is never dropped).
    _lib: Library,
}

/// NVRTC, or why it cannot be used. Loaded on first use.
pub static NVRTC: LazyLock<Result<Nvrtc, String>> =
    LazyLock::new(|| load_nvrtc(std::env::var_os("ANYFFI_NVRTC_LIBRARY")));

/// NVRTC from `path` (the value of `ANYFFI_NVRTC_LIBRARY`), else by soname.
pub fn load_nvrtc(path: Option<std::ffi::OsString>) -> Result<Nvrtc, String> {
    let lib = open(
        "ANYFFI_NVRTC_LIBRARY",
        path,
        &[
            "libnvrtc.so",
            "libnvrtc.so.13",
            "libnvrtc.so.12",
            "libnvrtc.so.11.2",
        ],
        NO_NVRTC,
    )?;
    let w = "NVRTC";
    // SAFETY: each type is the C declaration of the named NVRTC function (nvrtc.h, unchanged
    // from CUDA 11.2 to 13); `_lib` keeps them loaded.
    unsafe {
        Ok(Nvrtc {
            version: sym(&lib, b"nvrtcVersion\0", w)?,
            get_num_supported_archs: sym(&lib, b"nvrtcGetNumSupportedArchs\0", w)?,
            get_supported_archs: sym(&lib, b"nvrtcGetSupportedArchs\0", w)?,
            create_program: sym(&lib, b"nvrtcCreateProgram\0", w)?,
            destroy_program: sym(&lib, b"nvrtcDestroyProgram\0", w)?,
            compile_program: sym(&lib, b"nvrtcCompileProgram\0", w)?,
            get_program_log_size: sym(&lib, b"nvrtcGetProgramLogSize\0", w)?,
            get_program_log: sym(&lib, b"nvrtcGetProgramLog\0", w)?,
            get_ptx_size: sym(&lib, b"nvrtcGetPTXSize\0", w)?,
            get_ptx: sym(&lib, b"nvrtcGetPTX\0", w)?,
            get_cubin_size: sym(&lib, b"nvrtcGetCUBINSize\0", w)?,
            get_cubin: sym(&lib, b"nvrtcGetCUBIN\0", w)?,
            get_error_string: sym(&lib, b"nvrtcGetErrorString\0", w)?,
            _lib: lib,
        })
    }
}

/// `cublasGemmEx`.
pub type GemmEx = unsafe extern "C" fn(
    BlasHandle,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    *const c_void,
    *const c_void,
    c_int,
    c_int,
    *const c_void,
    c_int,
    c_int,
    *const c_void,
    *mut c_void,
    c_int,
    c_int,
    c_int,
    c_int,
) -> c_int;

/// `cublasGemmStridedBatchedEx`.
pub type GemmStridedBatchedEx = unsafe extern "C" fn(
    BlasHandle,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    *const c_void,
    *const c_void,
    c_int,
    c_int,
    i64,
    *const c_void,
    c_int,
    c_int,
    i64,
    *const c_void,
    *mut c_void,
    c_int,
    c_int,
    i64,
    c_int,
    c_int,
    c_int,
) -> c_int;

/// The cuBLAS functions the GEMMs use.
pub struct Cublas {
    pub create: unsafe extern "C" fn(*mut BlasHandle) -> c_int,
    pub set_stream: unsafe extern "C" fn(BlasHandle, *mut c_void) -> c_int,
    pub gemm_ex: GemmEx,
    pub gemm_strided_batched_ex: GemmStridedBatchedEx,
    /// Absent before cuBLAS 11.4.2: errors then carry the status code alone.
    pub get_status_string: Option<unsafe extern "C" fn(c_int) -> *const c_char>,
    /// Keeps the functions above loaded (the static is never dropped).
    _lib: Library,
}

/// cuBLAS, or why it cannot be used. Loaded on first use.
pub static CUBLAS: LazyLock<Result<Cublas, String>> =
    LazyLock::new(|| load_cublas(std::env::var_os("ANYFFI_CUBLAS_LIBRARY")));

/// cuBLAS from `path` (the value of `ANYFFI_CUBLAS_LIBRARY`), else by soname.
pub fn load_cublas(path: Option<std::ffi::OsString>) -> Result<Cublas, String> {
    let lib = open(
        "ANYFFI_CUBLAS_LIBRARY",
        path,
        &[
            "libcublas.so",
            "libcublas.so.13",
            "libcublas.so.12",
            "libcublas.so.11",
        ],
        NO_CUBLAS,
    )?;
    let w = "cuBLAS";
    // SAFETY: each type is the C declaration of the named cuBLAS function (cublas_api.h, the
    // same from CUDA 11 to 13); `_lib` keeps them loaded.
    unsafe {
        Ok(Cublas {
            create: sym(&lib, b"cublasCreate_v2\0", w)?,
            set_stream: sym(&lib, b"cublasSetStream_v2\0", w)?,
            gemm_ex: sym(&lib, b"cublasGemmEx\0", w)?,
            gemm_strided_batched_ex: sym(&lib, b"cublasGemmStridedBatchedEx\0", w)?,
            get_status_string: sym(&lib, b"cublasGetStatusString\0", w).ok(),
            _lib: lib,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_that_does_not_load_is_named_in_the_error() {
        let e = match open("V", None, &["libanyffi-no-such.so"], "none") {
            Err(e) => e,
            Ok(_) => panic!("loaded a library that does not exist"),
        };
        assert_eq!(e, "none");
        let path = Some("/nonexistent/libnvrtc.so.13".into());
        let e = match open("V", path, &["libc.so.6"], "none") {
            Err(e) => e,
            Ok(_) => panic!("the variable's path must win over the names"),
        };
        assert!(
            e.starts_with("V=/nonexistent/libnvrtc.so.13 could not be loaded"),
            "{e}"
        );
        assert!(open("V", None, &["libanyffi-no-such.so", "libc.so.6"], "none").is_ok());
    }

    #[test]
    fn a_missing_function_is_named() {
        let lib = open("V", None, &["libc.so.6"], "none").unwrap();
        // SAFETY: never called.
        let e = unsafe { sym::<unsafe extern "C" fn()>(&lib, b"nvrtcVersion\0", "NVRTC") }
            .err()
            .unwrap();
        assert!(e.starts_with("the NVRTC library lacks nvrtcVersion"), "{e}");
    }
}
