//! A guard against exhausting the thread's stack in walks that must recurse (visitors and
//! mutators re-enter themselves through C-ABI vtables and foreign hooks, so their depth cannot
//! be moved onto a heap stack).
//!
//! Rationale: a fixed depth limit is either too small for a large stack or too large for a small
//! one (Python and Rust threads differ by 4x). The guard instead compares the current stack
//! address with the bottom of the running thread's stack, found once per thread, and refuses to
//! go deeper when less than a safety margin is left.

use std::cell::Cell;

use crate::error::{Error, Result};

/// Stack kept free for the frames between two checks (foreign hooks included) and for
/// reporting the error.
const MARGIN: usize = 256 << 10;

thread_local! {
    /// Lowest usable stack address of this thread plus the margin (0: not known yet; 1: unknown).
    static LIMIT: Cell<usize> = const { Cell::new(0) };
}

fn thread_limit() -> usize {
    let mut attr = std::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
    // SAFETY: `pthread_getattr_np` initialises `attr` on success; it is destroyed after use.
    unsafe {
        if libc::pthread_getattr_np(libc::pthread_self(), attr.as_mut_ptr()) != 0 {
            return 1;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let rc = libc::pthread_attr_getstack(attr.as_ptr(), &mut addr, &mut size);
        libc::pthread_attr_destroy(attr.as_mut_ptr());
        if rc != 0 || addr.is_null() {
            return 1;
        }
        (addr as usize).saturating_add(MARGIN)
    }
}

/// Fails with a RecursionError-like ValueError naming `what` when the stack is nearly used up.
#[inline]
pub fn check(what: &str) -> Result<()> {
    let here = 0u8;
    let sp = &here as *const u8 as usize;
    let limit = LIMIT.with(|l| {
        if l.get() == 0 {
            l.set(thread_limit());
        }
        l.get()
    });
    if sp < limit {
        return Err(Error::value_error(format!(
            "{what}: the structure is nested too deeply for the thread's stack"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recurse(n: usize) -> Result<usize> {
        check("test")?;
        let pad = [n as u8; 512];
        std::hint::black_box(&pad);
        if n == 0 {
            return Ok(0);
        }
        let d = recurse(n - 1)?;
        // Keeps the frame (and its padding) alive across the call: no tail call.
        std::hint::black_box(&pad);
        Ok(d + 1)
    }

    #[test]
    fn deep_recursion_fails_cleanly() {
        let r = std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(|| {
                (
                    recurse(100).is_ok(),
                    recurse(1_000_000).unwrap_err().kind().to_owned(),
                )
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(r.0);
        assert_eq!(r.1, "ValueError");
    }
}
