//! NVRTC: the kernel sources (`src/*.cu`, each behind `src/common.cuh`) compiled at first use on
//! each device into one module (CUBIN for the device's architecture when this NVRTC knows it,
//! else PTX for the newest architecture it knows, which the driver JIT-compiles), loaded with
//! `cuModuleLoadData`, functions looked up once and cached.
//!
//! libnvrtc is loaded at run time by `libs.rs` (`ANYFFI_NVRTC_LIBRARY`, else `libnvrtc.so`,
//! `.so.13`, `.so.12`, ...); `available()` says why it cannot be used.

use std::collections::HashMap;
use std::ffi::{c_char, CStr, CString};
use std::sync::LazyLock;

use anyffi::{Error, Result};
use cudarc::driver::sys as cu;

use super::libs::{Nvrtc, Program, NVRTC, SUCCESS};
use parking_lot::Mutex;

/// The shared header put in front of every kernel file.
pub const COMMON: &str = include_str!("src/common.cuh");

/// Every kernel file: (name, source).
pub const SOURCES: [(&str, &str); 7] = [
    ("elementwise.cu", include_str!("src/elementwise.cu")),
    ("norm.cu", include_str!("src/norm.cu")),
    ("rope.cu", include_str!("src/rope.cu")),
    ("argmax.cu", include_str!("src/argmax.cu")),
    ("embedding.cu", include_str!("src/embedding.cu")),
    ("rearrange.cu", include_str!("src/rearrange.cu")),
    ("attention.cu", include_str!("src/attention.cu")),
];

pub use super::libs::NO_NVRTC;

/// The loaded NVRTC, or a RuntimeError saying why it cannot be used.
fn lib() -> Result<&'static Nvrtc> {
    NVRTC.as_ref().map_err(|e| Error::runtime_error(e.clone()))
}

/// Ok when NVRTC is loadable, else a RuntimeError naming the library.
pub fn available() -> Result<()> {
    lib().map(|_| ())
}

fn nvrtc_error(nv: &Nvrtc, rc: i32) -> String {
    // SAFETY: NVRTC's error strings are static (NULL or "NVRTC_ERROR unknown" for unknown
    // codes).
    let p = unsafe { (nv.get_error_string)(rc) };
    if p.is_null() {
        format!("NVRTC error {rc}")
    } else {
        // SAFETY: a NUL-terminated static string from NVRTC.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

fn check(nv: &Nvrtc, rc: i32, call: &str) -> Result<()> {
    if rc == SUCCESS {
        Ok(())
    } else {
        Err(Error::runtime_error(format!(
            "{call} failed: {}",
            nvrtc_error(nv, rc)
        )))
    }
}

/// `(major, minor)` of the NVRTC library.
pub fn version() -> Result<(i32, i32)> {
    let nv = lib()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: valid out-parameters.
    let rc = unsafe { (nv.version)(&mut major, &mut minor) };
    check(nv, rc, "nvrtcVersion")?;
    Ok((major, minor))
}

/// The real architectures (e.g. 80 for sm_80) this NVRTC can compile for.
pub fn supported_archs() -> Result<Vec<i32>> {
    let nv = lib()?;
    let mut n = 0;
    check(
        nv,
        // SAFETY: valid out-parameter.
        unsafe { (nv.get_num_supported_archs)(&mut n) },
        "nvrtcGetNumSupportedArchs",
    )?;
    let mut v = vec![0i32; n.max(0) as usize];
    check(
        nv,
        // SAFETY: `v` holds the n entries NVRTC writes.
        unsafe { (nv.get_supported_archs)(v.as_mut_ptr()) },
        "nvrtcGetSupportedArchs",
    )?;
    Ok(v)
}

/// The whole program: the common header and every kernel file.
pub fn program_source() -> String {
    let mut s = String::from(COMMON);
    for (name, src) in SOURCES {
        s.push_str(&format!("\n// ---- {name}\n"));
        s.push_str(src);
    }
    s
}

/// What `compile` produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Image {
    /// PTX text (NUL-terminated) for `compute_<arch>`.
    Ptx,
    /// A CUBIN for `sm_<arch>`.
    Cubin,
}

/// Compiles `src` (named `name` in messages) for architecture `arch` (e.g. 80). A compile error
/// is a RuntimeError carrying NVRTC's log.
pub fn compile(src: &str, name: &str, arch: i32, image: Image) -> Result<Vec<u8>> {
    let nv = lib()?;
    let csrc = CString::new(src)
        .map_err(|_| Error::value_error(format!("CUDA source {name} contains a NUL byte")))?;
    let cname = CString::new(name).map_err(|_| {
        Error::value_error(format!("CUDA source name {name:?} contains a NUL byte"))
    })?;
    let mut prog: Program = std::ptr::null_mut();
    check(
        nv,
        // SAFETY: NUL-terminated strings; no headers.
        unsafe {
            (nv.create_program)(
                &mut prog,
                csrc.as_ptr(),
                cname.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        },
        "nvrtcCreateProgram",
    )?;
    let result = compile_program(nv, prog, name, arch, image);
    // SAFETY: a program we created, destroyed once.
    unsafe { (nv.destroy_program)(&mut prog) };
    result
}

fn compile_program(
    nv: &Nvrtc,
    prog: Program,
    name: &str,
    arch: i32,
    image: Image,
) -> Result<Vec<u8>> {
    let gpu = match image {
        Image::Ptx => format!("--gpu-architecture=compute_{arch}"),
        Image::Cubin => format!("--gpu-architecture=sm_{arch}"),
    };
    let opts: Vec<CString> = [gpu.as_str(), "--std=c++14"]
        .iter()
        .map(|o| CString::new(*o).expect("options have no NUL"))
        .collect();
    let ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
    // SAFETY: a live program; `ptrs` holds opts.len() NUL-terminated options alive here.
    let rc = unsafe { (nv.compile_program)(prog, ptrs.len() as i32, ptrs.as_ptr()) };
    if rc != SUCCESS {
        let mut n = 0usize;
        // SAFETY: a live program; valid out-parameter.
        unsafe { (nv.get_program_log_size)(prog, &mut n) };
        let mut log = vec![0u8; n.max(1)];
        // SAFETY: `log` holds the n bytes NVRTC writes.
        unsafe { (nv.get_program_log)(prog, log.as_mut_ptr() as *mut c_char) };
        let log = String::from_utf8_lossy(&log)
            .trim_end_matches('\0')
            .to_string();
        return Err(Error::runtime_error(format!(
            "NVRTC could not compile {name} for {gpu}: {}\n{log}",
            nvrtc_error(nv, rc)
        )));
    }
    let mut n = 0usize;
    let mut out;
    match image {
        Image::Ptx => {
            // SAFETY: a compiled program; valid out-parameter.
            let rc = unsafe { (nv.get_ptx_size)(prog, &mut n) };
            check(nv, rc, "nvrtcGetPTXSize")?;
            out = vec![0u8; n];
            check(
                nv,
                // SAFETY: `out` holds the n bytes NVRTC writes.
                unsafe { (nv.get_ptx)(prog, out.as_mut_ptr() as *mut c_char) },
                "nvrtcGetPTX",
            )?;
        }
        Image::Cubin => {
            // SAFETY: a compiled program; valid out-parameter.
            let rc = unsafe { (nv.get_cubin_size)(prog, &mut n) };
            check(nv, rc, "nvrtcGetCUBINSize")?;
            out = vec![0u8; n];
            check(
                nv,
                // SAFETY: `out` holds the n bytes NVRTC writes.
                unsafe { (nv.get_cubin)(prog, out.as_mut_ptr() as *mut c_char) },
                "nvrtcGetCUBIN",
            )?;
        }
    }
    if out.is_empty() {
        return Err(Error::runtime_error(format!(
            "NVRTC produced an empty image for {name} ({gpu})"
        )));
    }
    Ok(out)
}

/// Per device: the loaded module (address), and the functions looked up in it.
struct Loaded {
    module: usize,
    functions: HashMap<&'static str, usize>,
}

static MODULES: LazyLock<Mutex<HashMap<i32, Loaded>>> = LazyLock::new(Default::default);

fn cu_check(rc: cu::CUresult, call: &str) -> Result<()> {
    if rc == cu::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::runtime_error(format!("{call} failed: {rc:?}")))
    }
}

/// The image for a device of compute capability `cc` (e.g. 90): CUBIN when NVRTC supports
/// `sm_<cc>`, else PTX for the newest supported architecture below it.
fn image_for(cc: i32) -> Result<Vec<u8>> {
    let archs = supported_archs()?;
    let src = program_source();
    if archs.contains(&cc) {
        return compile(&src, "anyffi_kernels.cu", cc, Image::Cubin);
    }
    let Some(&best) = archs.iter().filter(|&&a| a <= cc).max() else {
        return Err(Error::runtime_error(format!(
            "NVRTC {:?} cannot compile for this GPU (sm_{cc}); it supports {archs:?}",
            version()?
        )));
    };
    compile(&src, "anyffi_kernels.cu", best, Image::Ptx)
}

/// The kernel `name` on device `dev`, whose primary context the caller made current. The first
/// call per device compiles and loads the module.
pub fn function(dev: i32, name: &'static str) -> Result<cu::CUfunction> {
    let mut modules = MODULES.lock();
    if let std::collections::hash_map::Entry::Vacant(slot) = modules.entry(dev) {
        available()?;
        let attr = |a| super::device_attribute(dev, a);
        let major = attr(cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = attr(cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        let image = image_for(major * 10 + minor)?;
        let mut module: cu::CUmodule = std::ptr::null_mut();
        cu_check(
            // SAFETY: a context is current; `image` is a CUBIN or NUL-terminated PTX alive here.
            unsafe { cu::cuModuleLoadData(&mut module, image.as_ptr() as *const _) },
            "cuModuleLoadData",
        )?;
        slot.insert(Loaded {
            module: module as usize,
            functions: HashMap::new(),
        });
    }
    let loaded = modules.get_mut(&dev).expect("inserted above");
    if let Some(&f) = loaded.functions.get(name) {
        return Ok(f as cu::CUfunction);
    }
    let cname = CString::new(name).expect("kernel names have no NUL");
    let mut f: cu::CUfunction = std::ptr::null_mut();
    cu_check(
        // SAFETY: a module loaded in this device's primary context (never unloaded); valid
        // out-parameter and NUL-terminated name.
        unsafe { cu::cuModuleGetFunction(&mut f, loaded.module as cu::CUmodule, cname.as_ptr()) },
        "cuModuleGetFunction",
    )
    .map_err(|e| Error::runtime_error(format!("kernel {name}: {}", e.message())))?;
    loaded.functions.insert(name, f as usize);
    Ok(f)
}
