//! Compiles every CUDA kernel source with the real NVRTC, to PTX and to CUBIN for sm_80 and
//! sm_90, so syntax and type errors show up with no GPU. Needs libnvrtc: `tests/cuda/run.sh`
//! fetches it from PyPI (`nvidia-cuda-nvrtc-cu12`), points `ANYFFI_NVRTC_LIBRARY` at it and
//! sets `ANYFFI_REQUIRE_NVRTC=1`, under which a missing NVRTC fails instead of skipping.

use tvm_ffi::kernels::cuda::nvrtc::{self, Image};

const ARCHS: [i32; 2] = [80, 90];

/// True when NVRTC is loadable; otherwise skips (prints why) or, when required, fails.
fn nvrtc_or_skip() -> bool {
    match nvrtc::available() {
        Ok(()) => true,
        Err(e) => {
            if std::env::var_os("ANYFFI_REQUIRE_NVRTC").is_some_and(|v| v == "1") {
                panic!(
                    "ANYFFI_REQUIRE_NVRTC=1 but NVRTC is unavailable: {}",
                    e.message()
                );
            }
            eprintln!("skipped: {} (run tests/cuda/run.sh)", e.message());
            false
        }
    }
}

/// `.entry` names of a PTX text.
fn entries(ptx: &str) -> Vec<String> {
    ptx.lines()
        .filter_map(|l| {
            let i = l.find(".entry ")?;
            let rest = &l[i + 7..];
            Some(rest.split(['(', ' ']).next()?.trim().to_string())
        })
        .collect()
}

#[test]
fn every_source_compiles_to_ptx_for_sm80_and_sm90() {
    if !nvrtc_or_skip() {
        return;
    }
    let (major, minor) = nvrtc::version().unwrap();
    eprintln!(
        "NVRTC {major}.{minor}, archs {:?}",
        nvrtc::supported_archs().unwrap()
    );
    for (name, src) in nvrtc::SOURCES {
        let full = format!("{}\n{src}", nvrtc::COMMON);
        for arch in ARCHS {
            let ptx = nvrtc::compile(&full, name, arch, Image::Ptx)
                .unwrap_or_else(|e| panic!("{name} sm_{arch}: {}", e.message()));
            let text = String::from_utf8_lossy(&ptx);
            assert!(
                text.contains(&format!(".target sm_{arch}")),
                "{name}: no target line"
            );
            assert!(
                !entries(&text).is_empty(),
                "{name}: no kernel entry in the PTX"
            );
        }
    }
}

#[test]
fn whole_program_compiles_to_cubin_and_ptx_with_every_launched_kernel() {
    if !nvrtc_or_skip() {
        return;
    }
    let src = nvrtc::program_source();
    // Kernel names the launcher uses: the string literals of kernels/cuda/mod.rs that look like
    // `<family>_<dtype or size>`.
    let launcher = include_str!("../src/kernels/cuda/mod.rs");
    let mut wanted: Vec<&str> = launcher
        .split('"')
        .skip(1)
        .step_by(2)
        .filter(|s| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                && [
                    "_f32", "_f16", "_bf16", "_i64", "_i32", "_1", "_2", "_4", "_8", "_16", "_w32",
                ]
                .iter()
                .any(|suf| s.ends_with(suf))
        })
        .collect();
    wanted.sort();
    wanted.dedup();
    assert!(
        wanted.len() >= 30,
        "found only {} kernel names: {wanted:?}",
        wanted.len()
    );
    for arch in ARCHS {
        let ptx = nvrtc::compile(&src, "anyffi_kernels.cu", arch, Image::Ptx)
            .unwrap_or_else(|e| panic!("sm_{arch}: {}", e.message()));
        let names = entries(&String::from_utf8_lossy(&ptx));
        for w in &wanted {
            assert!(
                names.iter().any(|n| n == w),
                "kernel {w} is launched but not defined (sm_{arch})"
            );
        }
        let cubin = nvrtc::compile(&src, "anyffi_kernels.cu", arch, Image::Cubin)
            .unwrap_or_else(|e| panic!("sm_{arch} cubin: {}", e.message()));
        assert_eq!(&cubin[..4], b"\x7fELF", "a CUBIN is an ELF image");
    }
}

#[test]
fn a_broken_source_is_an_error_with_the_compiler_log() {
    if !nvrtc_or_skip() {
        return;
    }
    let src = format!(
        "{}\nextern \"C\" __global__ void bad(float* x) {{ x[0] = undefined_name; }}\n",
        nvrtc::COMMON
    );
    let e = nvrtc::compile(&src, "bad.cu", 80, Image::Ptx).unwrap_err();
    assert_eq!(e.kind(), "RuntimeError");
    assert!(e.message().contains("undefined_name"), "{}", e.message());
}
