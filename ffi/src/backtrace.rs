//! Backtraces in the official text format, behind `TVMFFIBacktrace` (`c_api.h`, error section;
//! spec §1.2) and behind the backtrace of every error anyffi creates itself.
//!
//! The text is one line per frame, most recent call first:
//! `  File "<file>", line <n>, in <function>\n`. It is built like the official library builds it:
//! - an optional caller-supplied first frame (`file`, `line`, `func`);
//! - then the stack, walked from the innermost frame outwards; inlined calls count as frames of
//!   their own;
//! - the walk ends after `TVM_TRACEBACK_LIMIT` lines (default 512, read on every call) or, unless
//!   asked to cross it, at the FFI boundary: a frame named `TVMFFIFunctionCall*`, `_Py*`,
//!   `PyObject*`, `slot_tp_call*` or `object_is_not_callable*` (the caller's language reports the
//!   frames beyond it itself);
//! - frames of the FFI plumbing are left out: the official rules (`tvm::ffi::Function*`,
//!   `tvm::ffi::detail::*`, `TVMFFIBacktrace*`, `TVMFFIErrorSetRaisedFromCStr*`, `__libc_*`,
//!   `ffi_call_*`, files under `include/tvm/ffi/{error,function_detail,function,any}.h` and
//!   `include/c++/`), plus their Rust counterparts: the `backtrace` crate, std's runtime, panic and
//!   closure-call frames, this module and `<crate>::error` (where errors capture backtraces);
//! - a frame with a function name but no file prints as `File "<unknown>", line 0`; a frame with
//!   neither (no symbol information at all) is not printed. (Upstream's libbacktrace also prints
//!   the end-of-stack sentinel as `File "<unknown>", line 0, in 0xffffffffffffffff` when a walk
//!   crosses the boundary and reaches the bottom of the stack; that artefact is not reproduced.)
//!
//! The Rust rules match module paths, which the debug info carries only from `debug = "limited"`
//! up: with `debug = "line-tables-only"` Rust functions are named without their path (`new`, not
//! `anyffi::error::Error::new`), so those rules cannot recognise them. The capture machinery (the
//! unwinder and this module) is recognised by address instead and stays out either way.
//!
//! Rationale: symbolising a frame (finding its function, file and line in the debug info) costs
//! tens of microseconds and the first one in a library costs milliseconds, while errors may be
//! raised in loops. So the walk only collects instruction pointers, and each pointer is resolved
//! once per process: the formatted lines are kept in a global cache keyed by instruction pointer.
//! A repeated error from the same call sites then costs one stack unwind and a few hash lookups.
//! The cache assumes code is not unloaded and replaced at the same address (`dlclose`); it is
//! emptied when it grows past `CACHE_MAX_ENTRIES` so that a long-running process cannot grow it
//! without bound.

use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

/// `TVM_TRACEBACK_LIMIT` when unset or unparsable, as upstream.
const DEFAULT_LIMIT: usize = 512;

/// The cache is emptied when it holds this many instruction pointers.
const CACHE_MAX_ENTRIES: usize = 1 << 16;

/// How many frames below `backtrace_string` are searched for the `TVMFFIBacktrace` shell.
const SHELL_LOOKAHEAD: usize = 16;

/// Symbol prefixes at which the walk stops unless `cross_ffi_boundary` (upstream's list).
const BOUNDARY_PREFIXES: &[&str] = &[
    "TVMFFIFunctionCall",
    "slot_tp_call",
    "object_is_not_callable",
    "_Py",
    "PyObject",
];

/// Symbol prefixes of frames that upstream never prints.
const EXCLUDED_SYMBOL_PREFIXES: &[&str] = &[
    "tvm::ffi::Function",
    "tvm::ffi::detail::",
    "TVMFFIBacktrace",
    "TVMFFIErrorSetRaisedFromCStr",
    "__libc_",
    "ffi_call_",
];

/// File name fragments of frames that upstream never prints: the header-only call plumbing and
/// the C++ standard library.
const EXCLUDED_FILE_PARTS: &[&str] = &[
    "include/tvm/ffi/error.h",
    "include/tvm/ffi/function_detail.h",
    "include/tvm/ffi/function.h",
    "include/tvm/ffi/any.h",
    "include/c++/",
    // Rust's standard library (`Result::map_err` and the like), as upstream hides libstdc++
    "/rustc/",
];

/// Rust paths of the unwinder, the runtime, panics and closure calls: the Rust counterpart of
/// upstream's libstdc++ rule. Matched against a symbol and, for `<A as B>::f`, against A and B.
const EXCLUDED_RUST_PREFIXES: &[&str] = &[
    "backtrace::",
    "std::backtrace",
    "std::rt::",
    "std::panicking",
    "std::panic::",
    "core::ops::function",
    "__rust_try",
    // Calling plumbing (typed-argument unpacking, closures around user code), as upstream hides
    // `tvm::ffi::Function*` and `function_detail.h`.
    "anyffi::function::",
    "anyffi::capi::guard",
    // the C error functions (`TVMFFIErrorSetRaisedFromCStr` and its helpers), which upstream
    // leaves out by name
    "anyffi::capi::error::",
    // the C++ API's forwarding into the global functions (`tvm::ffi::RecursiveLt` and the other
    // exported C++ entry points stay: upstream prints its own C++ function there)
    "anyffi_registry::cxx_api::",
    "anyffi_registry::cxx_abi::",
];

/// Builds the `TVMFFIBacktrace` text for the calling thread's stack.
///
/// When both `file` and `func` are given they describe the frame that is calling (the C caller of
/// `TVMFFIBacktrace`, or the Rust caller of this function): that frame is printed first, from the
/// given values, and its entry in the walked stack is skipped. `line` is only used with them.
/// With `cross_ffi_boundary` false the walk stops at the first FFI boundary frame (see the module
/// doc); with it true it runs to the end of the stack or the limit.
///
/// Called from the `TVMFFIBacktrace` shell, the frames from here up to the shell's own (the shell's
/// closures, `catch_unwind`, ...) are recognised as capture machinery and not counted, so the
/// caller of `TVMFFIBacktrace` is the first frame walked. Called from Rust, its caller is.
#[inline(never)]
pub fn backtrace_string(
    file: Option<&str>,
    line: i32,
    func: Option<&str>,
    cross_ffi_boundary: bool,
) -> String {
    let first = match (file, func) {
        (Some(file), Some(func)) => Some((file, line, func)),
        _ => None,
    };
    // The caller's own frame is already described by `first`.
    let skip = usize::from(first.is_some());
    let frames = walk_stack(
        backtrace_string as fn(Option<&str>, i32, Option<&str>, bool) -> String as usize,
    );
    render(first, frames, skip, !cross_ffi_boundary, limit_from_env())
}

/// The backtrace of the caller, for errors created in Rust: as `backtrace_string(None, 0, None,
/// false)`, but also leaving out the `skip_frames` innermost frames below this call, so that an
/// error constructor can hide itself with `capture(1)` (the trace then starts at the
/// constructor's caller).
///
/// Frames are counted before the exclusion rules apply, as upstream counts them: a skipped frame
/// may be one that would have been left out anyway.
#[inline(never)]
pub fn capture(skip_frames: usize) -> String {
    render(
        None,
        walk_stack(capture as fn(usize) -> String as usize),
        skip_frames,
        true,
        limit_from_env(),
    )
}

/// Reads `TVM_TRACEBACK_LIMIT` as upstream does (`strtol` base 10): optional leading C whitespace
/// and sign, digits, nothing after them, and a value in `0..=i32::MAX`; anything else means the
/// default. It is read on every call so that changing it at run time takes effect at once; the
/// lookup costs far less than the stack walk.
fn limit_from_env() -> usize {
    std::env::var("TVM_TRACEBACK_LIMIT")
        .ok()
        .and_then(|v| parse_limit(&v))
        .unwrap_or(DEFAULT_LIMIT)
}

fn parse_limit(text: &str) -> Option<usize> {
    let digits = text.trim_start_matches([' ', '\t', '\n', '\u{b}', '\u{c}', '\r']);
    let value: i64 = digits.parse().ok()?;
    (0..=i64::from(i32::MAX))
        .contains(&value)
        .then_some(value as usize)
}

/// One frame as printed: a function (possibly inlined into the next one) at a source position.
#[derive(Debug)]
struct ResolvedFrame {
    /// The formatted line, or `None` for a frame that is never printed (no symbol information).
    text: Option<Box<str>>,
    /// Part of the capture itself by name: the `backtrace` crate or this module (a fallback for
    /// when the address-based cut in `walk_stack` finds nothing).
    machinery: bool,
    /// The C shell `TVMFFIBacktrace` (any symbol with that prefix).
    shell: bool,
    /// Left out of the output (but still counted for skipping).
    excluded: bool,
    /// An FFI boundary frame: the walk stops here unless asked to cross it.
    boundary: bool,
}

impl ResolvedFrame {
    /// Classifies and formats a frame. `name` is the demangled function name, if known; `pc` is
    /// the address printed in its place when there is a file but no name, as upstream does.
    fn new(name: Option<&str>, file: Option<&str>, line: u32, pc: usize) -> ResolvedFrame {
        let sym = name.unwrap_or("");
        let text = match (name, file) {
            (_, Some(file)) => {
                let fallback;
                let func = match name {
                    Some(name) => name,
                    None => {
                        fallback = format!("0x{pc:016x}");
                        &fallback
                    }
                };
                Some(format_line(file, i64::from(line), func))
            }
            (Some(name), None) => Some(format_line("<unknown>", i64::from(line), name)),
            (None, None) => None,
        };
        ResolvedFrame {
            text: text.map(String::into_boxed_str),
            machinery: is_machinery(sym),
            shell: sym.starts_with("TVMFFIBacktrace"),
            excluded: should_exclude(file, sym),
            boundary: BOUNDARY_PREFIXES.iter().any(|p| sym.starts_with(p)),
        }
    }
}

fn format_line(file: &str, line: i64, func: &str) -> String {
    format!("  File \"{file}\", line {line}, in {func}\n")
}

/// The prefix of this module's own symbols, e.g. `anyffi::backtrace::`.
fn own_prefix() -> &'static str {
    static PREFIX: OnceLock<String> = OnceLock::new();
    PREFIX.get_or_init(|| format!("{}::", module_path!()))
}

/// The prefix of the error module's symbols, e.g. `anyffi::error::`.
fn error_prefix() -> &'static str {
    static PREFIX: OnceLock<String> = OnceLock::new();
    PREFIX.get_or_init(|| format!("{}::error::", env!("CARGO_CRATE_NAME")))
}

/// Whether `sym` is a function of this module other than its unit tests (which must stay visible
/// so that they can look at their own frames).
fn is_own(sym: &str) -> bool {
    sym.strip_prefix(own_prefix())
        .is_some_and(|rest| !rest.starts_with("tests::"))
}

/// Frames that sit on top of every capture: the unwinder and this module.
fn is_machinery(sym: &str) -> bool {
    is_own(sym) || sym.starts_with("backtrace::") || sym.starts_with("std::backtrace")
}

/// Upstream's exclusion rules plus the Rust ones (see the module doc).
fn should_exclude(file: Option<&str>, sym: &str) -> bool {
    if EXCLUDED_SYMBOL_PREFIXES.iter().any(|p| sym.starts_with(p)) {
        return true;
    }
    if file.is_some_and(|f| EXCLUDED_FILE_PARTS.iter().any(|part| f.contains(part))) {
        return true;
    }
    // `<A as B>::f`: the frame belongs to both A's and B's crates for our purposes
    // (`<Box<F> as core::ops::function::FnOnce>::call_once` is closure plumbing).
    let mut paths = vec![sym];
    if let Some(inner) = sym.strip_prefix('<') {
        paths.push(inner);
        if let Some((_, trait_path)) = inner.split_once(" as ") {
            paths.push(trait_path);
        }
    }
    paths.iter().any(|p| {
        EXCLUDED_RUST_PREFIXES
            .iter()
            .any(|prefix| p.starts_with(prefix))
            || is_own(p)
            || p.starts_with(error_prefix())
            || p.contains("__rust_begin_short_backtrace")
    })
}

/// Formats a walk: the optional first frame, then `frames` (innermost first), skipping the
/// leading capture machinery (through the `TVMFFIBacktrace` shell if it is among the first
/// `SHELL_LOOKAHEAD` frames) and then `skip` frames, leaving out excluded ones, stopping at an FFI
/// boundary when `stop_at_boundary` and after `limit` lines.
///
/// Rationale: the order of the checks is upstream's (limit, boundary, skip, exclusion), so that
/// e.g. a boundary frame stops the walk even when it would have been skipped, and the optional
/// first frame is written even with a limit of 0. `frames` is consumed lazily so that frames
/// past the end are never symbolised.
fn render<I>(
    first: Option<(&str, i32, &str)>,
    frames: I,
    skip: usize,
    stop_at_boundary: bool,
    limit: usize,
) -> String
where
    I: IntoIterator,
    I::Item: AsRef<ResolvedFrame>,
{
    let mut out = String::new();
    let mut lines = 0usize;
    if let Some((file, line, func)) = first {
        if !should_exclude(Some(file), func) {
            out.push_str(&format_line(file, i64::from(line), func));
            lines += 1;
        }
    }
    let mut frames = frames.into_iter();
    let mut head: Vec<I::Item> = frames.by_ref().take(SHELL_LOOKAHEAD).collect();
    if let Some(at) = head.iter().position(|f| f.as_ref().shell) {
        head.drain(..=at);
    }
    let walked = head
        .into_iter()
        .chain(frames)
        .skip_while(|f| f.as_ref().machinery);
    let mut skip = skip;
    for frame in walked {
        let frame = frame.as_ref();
        if lines >= limit {
            break;
        }
        if stop_at_boundary && frame.boundary {
            break;
        }
        if skip > 0 {
            skip -= 1;
            continue;
        }
        if frame.excluded {
            continue;
        }
        if let Some(text) = &frame.text {
            out.push_str(text);
            lines += 1;
        }
    }
    out
}

/// The calling thread's stack below the public function starting at address `entry`, as resolved
/// frames, innermost first, resolved lazily.
///
/// Rationale: the frames above and including `entry` (the unwinder, this module's helpers) are
/// dropped by comparing each frame's function start with `entry`, before anything is resolved.
/// Recognising them by name is only the fallback, because with `debug = "line-tables-only"` the
/// debug info names functions without their module path (`capture`, not
/// `anyffi::backtrace::capture`).
fn walk_stack(entry: usize) -> impl Iterator<Item = ResolvedFrameRef> {
    let mut ips = Vec::with_capacity(64);
    let mut entry_at = None;
    backtrace::trace(|frame| {
        if entry_at.is_none() && frame.symbol_address() as usize == entry {
            entry_at = Some(ips.len());
        }
        ips.push(frame.ip() as usize);
        true
    });
    if let Some(at) = entry_at {
        ips.drain(..=at);
    }
    ips.into_iter().flat_map(|ip| {
        let frames = resolve_cached(ip);
        (0..frames.len()).map(move |i| ResolvedFrameRef(Arc::clone(&frames), i))
    })
}

/// One frame of a cached instruction pointer's inline chain.
struct ResolvedFrameRef(Arc<[ResolvedFrame]>, usize);

impl AsRef<ResolvedFrame> for ResolvedFrameRef {
    fn as_ref(&self) -> &ResolvedFrame {
        &self.0[self.1]
    }
}

impl AsRef<ResolvedFrame> for ResolvedFrame {
    fn as_ref(&self) -> &ResolvedFrame {
        self
    }
}

type Cache = Mutex<BTreeMap<usize, Arc<[ResolvedFrame]>>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(BTreeMap::new()))
}

/// The frames (innermost inlined call first) at instruction pointer `ip`, from the cache or
/// resolved and then cached. The lock is not held while resolving, so other threads only wait for
/// map operations; two threads may resolve the same new address, which is harmless.
fn resolve_cached(ip: usize) -> Arc<[ResolvedFrame]> {
    if let Some(found) = cache().lock().get(&ip) {
        return Arc::clone(found);
    }
    let resolved = resolve(ip);
    let mut map = cache().lock();
    if map.len() >= CACHE_MAX_ENTRIES {
        map.clear();
    }
    Arc::clone(map.entry(ip).or_insert(resolved))
}

fn resolve(ip: usize) -> Arc<[ResolvedFrame]> {
    // The unwinder reports return addresses; the call itself is the instruction before, which is
    // also what the `backtrace` crate looks up.
    let pc = ip.saturating_sub(1);
    let mut frames = Vec::new();
    backtrace::resolve(ip as *mut c_void, |symbol| {
        let name = symbol.name().map(|n| display_name(&n));
        let file = symbol.filename().map(|f| f.to_string_lossy().into_owned());
        let line = symbol.lineno().unwrap_or(0);
        frames.push(ResolvedFrame::new(
            name.as_deref(),
            file.as_deref(),
            line,
            pc,
        ));
    });
    if frames.is_empty() {
        // No symbol information at all: never printed, but it is still a frame for counting.
        frames.push(ResolvedFrame::new(None, None, 0, pc));
    }
    frames.into()
}

/// A symbol name as printed: Rust names demangled without their hash suffix (`{:#}`), C++ names
/// demangled by the C++ runtime's `__cxa_demangle`.
///
/// Rationale: upstream prints C++ names through `__cxa_demangle`, so using the same demangler
/// gives the same text (`void ns::f<int>(std::vector<int, std::allocator<int> >)`). This relies
/// on the `backtrace` crate leaving C++ names mangled, i.e. on its `cpp_demangle` feature being
/// off; with it on, its own C++ demangler is used instead, which differs in details.
fn display_name(name: &backtrace::SymbolName<'_>) -> String {
    let shown = format!("{name:#}");
    if shown.starts_with("_Z") {
        if let Some(demangled) = cxa_demangle(&shown) {
            return demangled;
        }
    }
    shown
}

/// libstdc++'s / libc++abi's `__cxa_demangle`.
type CxaDemangle =
    unsafe extern "C" fn(*const c_char, *mut c_char, *mut usize, *mut c_int) -> *mut c_char;

/// Demangles an Itanium C++ name with the process's C++ runtime, if one is loaded: C++ frames
/// only exist when one is. The address is looked up on every call (only cache misses demangle),
/// so a runtime loaded after the first backtrace is still found.
#[cfg(unix)]
fn cxa_demangle(mangled: &str) -> Option<String> {
    // SAFETY: `dlsym` with `RTLD_DEFAULT` and a NUL-terminated name only reads the loaded objects'
    // symbol tables.
    let addr = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__cxa_demangle".as_ptr()) };
    if addr.is_null() {
        return None;
    }
    // SAFETY: `__cxa_demangle` has this signature in every C++ ABI runtime (Itanium C++ ABI §3.4).
    let demangle: CxaDemangle = unsafe { std::mem::transmute::<*mut c_void, CxaDemangle>(addr) };
    let input = CString::new(mangled).ok()?;
    let mut status: c_int = 0;
    // SAFETY: `input` is NUL-terminated; a NULL buffer (and NULL length) asks for a newly
    // `malloc`ed result, which we own.
    let out = unsafe {
        demangle(
            input.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut status,
        )
    };
    if out.is_null() {
        return None;
    }
    // SAFETY: on success `out` is a NUL-terminated string; it stays valid until freed below.
    let text = unsafe { CStr::from_ptr(out) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: `out` came from `malloc` in `__cxa_demangle` and is freed exactly once.
    unsafe { libc::free(out.cast()) };
    (status == 0 && !text.is_empty()).then_some(text)
}

#[cfg(not(unix))]
fn cxa_demangle(_mangled: &str) -> Option<String> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::RwLock;
    use std::hint::black_box;
    use std::time::Instant;

    /// Tests that walk the real stack hold this for reading; `limit_env_var` holds it for writing
    /// while it changes `TVM_TRACEBACK_LIMIT`, which every walk reads.
    static ENV: RwLock<()> = RwLock::new(());

    fn frame(name: &str, file: Option<&str>, line: u32) -> ResolvedFrame {
        ResolvedFrame::new(Some(name), file, line, 0x1234)
    }

    #[test]
    fn line_format() {
        let frames = [
            frame("my::func", Some("/src/a.rs"), 12),
            frame("main", None, 0),
        ];
        let text = render(
            Some(("/src/b.cc", 7, "void g()")),
            frames.map(Arc::new),
            0,
            true,
            512,
        );
        assert_eq!(
            text,
            "  File \"/src/b.cc\", line 7, in void g()\n  File \"/src/a.rs\", line 12, in my::func\n  \
             File \"<unknown>\", line 0, in main\n"
        );
    }

    #[test]
    fn rules_on_synthetic_frames() {
        let frames = [
            frame(
                "backtrace::backtrace::trace",
                Some("/cargo/backtrace/src/lib.rs"),
                1,
            ),
            frame(
                &format!("{}backtrace_string", own_prefix()),
                Some("/x/backtrace.rs"),
                2,
            ),
            frame("TVMFFIBacktrace", None, 0),
            frame("caller", Some("/c/caller.cc"), 3),
            frame("tvm::ffi::Function::operator()", Some("/c/f.cc"), 4),
            frame("helper", Some("/usr/include/c++/13/bits/std_function.h"), 5),
            ResolvedFrame::new(None, None, 0, 0x55),
            ResolvedFrame::new(None, Some("/c/nosym.c"), 6, 0xabc),
            frame(
                &format!("{}Error::new", error_prefix()),
                Some("/x/error.rs"),
                7,
            ),
            frame(
                "<alloc::boxed::Box<F> as core::ops::function::FnOnce<A>>::call_once",
                Some("/r/boxed.rs"),
                8,
            ),
            frame("user_fn", Some("/c/user.cc"), 9),
            frame("_PyEval_EvalFrameDefault", None, 0),
            frame("beyond", Some("/c/beyond.cc"), 10),
        ]
        .map(Arc::new);
        // The machinery on top is dropped, `caller` is skipped, exclusions apply, `_Py*` stops.
        assert_eq!(
            render(Some(("/c/caller.cc", 3, "caller")), &frames, 1, true, 512),
            "  File \"/c/caller.cc\", line 3, in caller\n  File \"/c/nosym.c\", line 6, in \
             0x0000000000000abc\n  File \"/c/user.cc\", line 9, in user_fn\n"
        );
        // Crossing the boundary prints the interpreter frame (no file) and the one beyond.
        let crossed = render(None, &frames, 0, false, 512);
        assert!(
            crossed.starts_with("  File \"/c/caller.cc\", line 3, in caller\n"),
            "{crossed}"
        );
        assert!(crossed.ends_with(
            "  File \"<unknown>\", line 0, in _PyEval_EvalFrameDefault\n  File \"/c/beyond.cc\", line 10, in beyond\n"
        ));
        // Limits count printed lines, including the given first frame, which is always written.
        assert_eq!(
            render(Some(("/f.cc", 1, "f")), &frames, 0, true, 0),
            "  File \"/f.cc\", line 1, in f\n"
        );
        assert_eq!(render(None, &frames, 0, true, 2).lines().count(), 2);
        // A skipped boundary frame still stops the walk.
        let top = [
            frame("TVMFFIFunctionCall", None, 0),
            frame("x", Some("/x.c"), 1),
        ]
        .map(Arc::new);
        assert_eq!(render(None, &top, 1, true, 512), "");
        assert_eq!(
            render(None, &top, 1, false, 512),
            "  File \"/x.c\", line 1, in x\n"
        );
    }

    #[test]
    fn cxx_names_demangle_like_upstream() {
        // A Rust test binary has no C++ runtime of its own: load one (globally, so that
        // `RTLD_DEFAULT` finds it), or skip where none is installed.
        // SAFETY: loading libstdc++ runs only its own initialisers; the handle is never closed.
        let handle = unsafe {
            libc::dlopen(
                c"libstdc++.so.6".as_ptr(),
                libc::RTLD_NOW | libc::RTLD_GLOBAL,
            )
        };
        if handle.is_null() {
            println!("libstdc++.so.6 not found: C++ demangling not tested");
            return;
        }
        let text = cxa_demangle("_ZN2ns4tmplIiEEvT_St6vectorIiSaIiEE").expect("__cxa_demangle");
        assert_eq!(
            text,
            "void ns::tmpl<int>(int, std::vector<int, std::allocator<int> >)"
        );
        assert_eq!(cxa_demangle("not_mangled"), None);
    }

    #[test]
    fn limit_parsing_is_strtol_like() {
        assert_eq!(parse_limit("10"), Some(10));
        assert_eq!(parse_limit("  +7"), Some(7));
        assert_eq!(parse_limit("-0"), Some(0));
        assert_eq!(parse_limit("0"), Some(0));
        assert_eq!(parse_limit(""), None);
        assert_eq!(parse_limit("5 "), None);
        assert_eq!(parse_limit("-1"), None);
        assert_eq!(parse_limit("0x10"), None);
        assert_eq!(parse_limit("2147483648"), None);
        assert_eq!(parse_limit("2147483647"), Some(2147483647));
    }

    #[inline(never)]
    fn named_rust_function_for_backtrace() -> String {
        black_box(capture(0))
    }

    #[test]
    fn rust_frame_has_file_and_line() {
        let _env = ENV.read();
        let text = named_rust_function_for_backtrace();
        let line = text
            .lines()
            // Only the function name: release builds with line tables only omit the module path.
            .find(|l| l.ends_with("named_rust_function_for_backtrace"))
            .unwrap_or_else(|| panic!("frame missing from:\n{text}"));
        assert!(
            line.starts_with("  File \"") && line.contains("backtrace.rs\", line "),
            "{line}"
        );
        let first = text.lines().next().unwrap();
        assert_eq!(first, line, "the function is the innermost frame:\n{text}");
        // Our own machinery and the `backtrace` crate stay out.
        assert!(!text.contains("backtrace::trace"), "{text}");
        assert!(!text.contains("backtrace::capture"), "{text}");
        for l in text.lines() {
            assert!(
                l.starts_with("  File \"") && l.contains("\", line ") && l.contains(", in "),
                "{l}"
            );
        }
        println!("{text}");
    }

    #[inline(never)]
    fn skip_one_frame() -> String {
        black_box(capture(1))
    }

    #[test]
    fn capture_skips_callers_frames() {
        let _env = ENV.read();
        let text = skip_one_frame();
        assert!(!text.contains("skip_one_frame"), "{text}");
        assert!(
            text.lines()
                .next()
                .unwrap()
                .contains("capture_skips_callers_frames"),
            "{text}"
        );
    }

    #[inline(never)]
    fn given_frame_replaces_caller() -> String {
        black_box(backtrace_string(
            Some("/given/file.cc"),
            42,
            Some("given_func"),
            true,
        ))
    }

    #[test]
    fn given_frame_comes_first() {
        let _env = ENV.read();
        let text = given_frame_replaces_caller();
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some("  File \"/given/file.cc\", line 42, in given_func")
        );
        let second = lines.next().unwrap();
        assert!(second.contains("given_frame_comes_first"), "{text}");
        assert!(!text.contains("given_frame_replaces_caller"), "{text}");
        // Only one of file and func: no first frame, nothing skipped.
        let text = backtrace_string(Some("/given/file.cc"), 42, None, true);
        assert!(
            text.lines()
                .next()
                .unwrap()
                .contains("given_frame_comes_first"),
            "{text}"
        );
    }

    /// Stands in for the real shell (same prefix, different name): like it, it calls
    /// `backtrace_string` inside `catch_unwind`, whose frames must not be counted.
    #[no_mangle]
    #[inline(never)]
    #[allow(non_snake_case)]
    extern "C" fn TVMFFIBacktrace_anyffi_test_shell(out: *mut String) {
        let text = std::panic::catch_unwind(|| {
            backtrace_string(Some("/c/caller.c"), 3, Some("c_caller"), true)
        });
        // SAFETY: `out` points at the caller's live `String` (see `c_like_caller`).
        unsafe { *out = text.unwrap_or_default() };
    }

    #[inline(never)]
    fn c_like_caller() -> String {
        let mut text = String::new();
        let shell: extern "C" fn(*mut String) = black_box(TVMFFIBacktrace_anyffi_test_shell);
        shell(&mut text);
        black_box(text)
    }

    #[test]
    fn shell_frames_are_not_counted() {
        let _env = ENV.read();
        let text = c_like_caller();
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some("  File \"/c/caller.c\", line 3, in c_caller"),
            "{text}"
        );
        assert!(
            lines
                .next()
                .unwrap()
                .contains("shell_frames_are_not_counted"),
            "{text}"
        );
        assert!(
            !text.contains("c_like_caller") && !text.contains("TVMFFIBacktrace"),
            "{text}"
        );
    }

    /// Named with upstream's boundary prefix (which is a prefix match) but not the exact name,
    /// so that it cannot clash with the crate's real `TVMFFIFunctionCall`.
    #[no_mangle]
    #[inline(never)]
    #[allow(non_snake_case)]
    extern "C" fn TVMFFIFunctionCall_anyffi_backtrace_test(cross: i32, out: *mut String) {
        let text = inner_below_boundary(cross != 0);
        // SAFETY: `out` points at the caller's live `String` (see `stop_at_ffi_boundary`).
        unsafe { *out = text };
    }

    #[inline(never)]
    fn inner_below_boundary(cross: bool) -> String {
        black_box(backtrace_string(None, 0, None, cross))
    }

    #[inline(never)]
    fn above_boundary(cross: bool) -> String {
        let mut text = String::new();
        let f: extern "C" fn(i32, *mut String) =
            black_box(TVMFFIFunctionCall_anyffi_backtrace_test);
        f(i32::from(cross), &mut text);
        text
    }

    #[test]
    fn stop_at_ffi_boundary() {
        let _env = ENV.read();
        let stopped = above_boundary(false);
        assert!(stopped.contains("inner_below_boundary"), "{stopped}");
        assert!(!stopped.contains("TVMFFIFunctionCall"), "{stopped}");
        assert!(!stopped.contains("above_boundary"), "{stopped}");
        assert_eq!(stopped.lines().count(), 1, "{stopped}");
        let crossed = above_boundary(true);
        assert!(crossed.contains("inner_below_boundary"), "{crossed}");
        assert!(
            crossed.contains("in TVMFFIFunctionCall_anyffi_backtrace_test\n"),
            "{crossed}"
        );
        assert!(crossed.contains("above_boundary"), "{crossed}");
    }

    /// The only test that touches `TVM_TRACEBACK_LIMIT`, since tests share the environment.
    #[test]
    fn limit_env_var() {
        let _env = ENV.write();
        let deep = capture(0).lines().count();
        assert!(deep >= 3, "need a few frames to test the limit");
        std::env::set_var("TVM_TRACEBACK_LIMIT", "2");
        let two = capture(0);
        std::env::set_var("TVM_TRACEBACK_LIMIT", "0");
        let none = capture(0);
        let given = backtrace_string(Some("/f.cc"), 1, Some("f"), false);
        std::env::set_var("TVM_TRACEBACK_LIMIT", "garbage");
        let fallback = capture(0);
        std::env::remove_var("TVM_TRACEBACK_LIMIT");
        assert_eq!(two.lines().count(), 2, "{two}");
        assert_eq!(none, "");
        assert_eq!(given, "  File \"/f.cc\", line 1, in f\n");
        assert_eq!(fallback.lines().count(), deep, "{fallback}");
    }

    // Its body differs from `named_rust_function_for_backtrace`'s so that release builds do not
    // merge the two identical functions into one.
    #[inline(never)]
    fn timed_capture() -> String {
        black_box(capture(black_box(0)))
    }

    /// Prints (does not assert) what caching buys; run with `--nocapture`.
    #[test]
    fn capture_cost() {
        let _env = ENV.read();
        let mut costs = Vec::with_capacity(1001);
        let mut texts = Vec::with_capacity(1001);
        for _ in 0..1001 {
            let start = Instant::now();
            texts.push(timed_capture());
            costs.push(start.elapsed());
        }
        // Same call sites every time, so the same text.
        assert!(texts.iter().all(|t| *t == texts[0]));
        let rest = costs[1..].iter().sum::<std::time::Duration>() / 1000;
        println!(
            "capture: first {:?}, 1000th {:?}, mean of the 1000 after the first {rest:?} ({} lines)",
            costs[0],
            costs[1000],
            texts[0].lines().count()
        );
    }
}
