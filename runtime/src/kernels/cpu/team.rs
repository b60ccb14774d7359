//! A fork-join team for the kernels' parallel loops: the calling thread works on the job
//! itself beside `min(threads(), CPUs) - 1` helper threads that spin for a short while after
//! each job before they sleep.
//!
//! Why not the rayon pool alone: `ThreadPool::install` from a thread outside the pool hands
//! the whole job to a sleeping worker and blocks the caller on a condition variable, two
//! cross-thread wake-ups per call. On the 2-vCPU VMs here those cost 10-15 us per call (an
//! `add` of 256 KiB took 4.9 us on one thread and 17 us on two; performance log, session
//! 16), more than many decode-sized kernels take in all. Here the caller starts at once, and
//! a helper that is still spinning joins within a fraction of a microsecond; a sleeping one
//! is woken and joins if work is left when it arrives. The spin (`ANYFFI_SPIN_US`, default
//! 300 us, about libgomp's default spin; 0: helpers sleep at once, the caller still spins
//! 20 us for their last chunks) is what OpenMP runtimes and OpenBLAS do too (OpenBLAS spins
//! for ~0.1 s).
//!
//! The caller waits for its helpers' last chunks the same way: 20 us of pure spinning, then
//! spinning with `sched_yield` (a helper that shares its core gets it) for the rest of the
//! spin, then sleeping. With 20 us and then sleep (session 16), a helper late to a call (woken
//! from sleep after an idle gap) made the caller sleep, the caller's own wake-up outlasted the
//! helper's 100 us spin, and the pair fell into sleeping and waking on every call: bursts of
//! (16,1536,1536) `linear` after 50 ms gaps ran at the one-thread time (median 0.35 against
//! 0.19 ms; performance log, session 17).
//!
//! Protocol. `state` holds `epoch << 32 | CLOSED | joined`. The caller publishes a job by
//! storing a new epoch (open, nobody joined); a helper joins by incrementing `joined` with a
//! compare-and-swap that fails once the epoch is closed or replaced, and only a helper that
//! joined may read the job. When the caller has run out of chunks it closes the epoch and
//! waits until `done` reaches the number that joined, so the job (on the caller's stack) is
//! never touched after `run` returns. A helper that arrives late finds the epoch closed and
//! goes back to waiting.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, TryLockError};

use super::ForkLocal;
use std::time::{Duration, Instant};

/// How long the caller spins for the helpers' last chunks before it also yields its core
/// while spinning (until the team's `spin`), and then sleeps.
const FINISH_SPIN: Duration = Duration::from_micros(20);

const CLOSED: u64 = 1 << 31;
const JOINED: u64 = CLOSED - 1;

/// One published job: chunks `0..count` taken from a shared counter.
struct Job<'a> {
    f: &'a (dyn Fn(usize) + Sync),
    count: usize,
    next: AtomicUsize,
    panicked: AtomicBool,
}

impl Job<'_> {
    fn work(&self) {
        loop {
            let c = self.next.fetch_add(1, Ordering::Relaxed);
            if c >= self.count {
                break;
            }
            (self.f)(c);
        }
    }
}

pub(crate) struct Team {
    state: AtomicU64,
    job: AtomicPtr<Job<'static>>,
    done: AtomicU32,
    sleepers: AtomicUsize,
    park: Mutex<()>,
    wake: Condvar,
    /// Set while the caller sleeps on `finish` waiting for `done` (after a short spin).
    waiting: AtomicBool,
    finish: Condvar,
    /// Held by the thread whose job is published (one job at a time).
    submit: Mutex<()>,
    spin: Duration,
}

thread_local! {
    /// Set while this thread runs a job's chunks (as caller or helper): nested parallel
    /// loops then run on the calling thread.
    static IN_JOB: Cell<bool> = const { Cell::new(false) };
}

static TEAM: ForkLocal<Team> = ForkLocal::new();

/// The team, built on first use with `helpers` helper threads; None when there are none to
/// start (one thread configured, or no thread could be spawned).
pub(crate) fn team(helpers: usize) -> Option<&'static Team> {
    if helpers == 0 {
        return TEAM.get();
    }
    TEAM.get_or_build(forget_team_in_child, || {
        let spin_us = std::env::var("ANYFFI_SPIN_US")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(300);
        let team: &'static Team = Box::leak(Box::new(Team {
            state: AtomicU64::new(0),
            job: AtomicPtr::new(std::ptr::null_mut()),
            done: AtomicU32::new(0),
            sleepers: AtomicUsize::new(0),
            park: Mutex::new(()),
            wake: Condvar::new(),
            waiting: AtomicBool::new(false),
            finish: Condvar::new(),
            submit: Mutex::new(()),
            spin: Duration::from_micros(spin_us),
        }));
        for i in 0..helpers {
            let spawned = std::thread::Builder::new()
                .name(format!("anyffi-team-{i}"))
                .spawn(move || team.helper());
            if spawned.is_err() {
                if i == 0 {
                    return None;
                }
                // fewer helpers than asked: the ones running share the work
                break;
            }
        }
        Some(team)
    })
}

/// `pthread_atfork` child handler: the parent's helpers do not exist in the child; forget the
/// team (leaked, never joined) so that the child builds its own.
extern "C" fn forget_team_in_child() {
    TEAM.forget();
}

/// Whether this thread is inside a team job (nested loops then run serially).
pub(crate) fn in_job() -> bool {
    IN_JOB.try_with(Cell::get).unwrap_or(true)
}

struct JobFlag;

impl JobFlag {
    fn set() -> JobFlag {
        let _ = IN_JOB.try_with(|c| c.set(true));
        JobFlag
    }
}

impl Drop for JobFlag {
    fn drop(&mut self) {
        let _ = IN_JOB.try_with(|c| c.set(false));
    }
}

impl Team {
    /// Runs `f(c)` for every `c < count`, on this thread and on the helpers that join, and
    /// returns when all have run. Returns false without running anything when another thread's
    /// job holds the team (the caller then uses the rayon pool).
    pub(crate) fn run(&self, count: usize, f: &(dyn Fn(usize) + Sync)) -> bool {
        let _submit = match self.submit.try_lock() {
            Ok(g) => g,
            // a chunk panicked on the thread that held it: nothing it guards was left half done
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return false,
        };
        let _flag = JobFlag::set();
        let job = Job {
            f,
            count,
            next: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
        };
        // SAFETY (of the erased lifetime): helpers read the job only after joining this
        // epoch, and `Close` below waits for every helper that joined before `job` goes.
        self.job
            .store(&job as *const Job as *mut Job<'static>, Ordering::Relaxed);
        self.done.store(0, Ordering::Relaxed);
        let epoch = ((self.state.load(Ordering::Relaxed) >> 32) + 1) & 0xffff_ffff;
        self.state.store(epoch << 32, Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _park = self.park.lock().unwrap_or_else(|e| e.into_inner());
            self.wake.notify_all();
        }
        // closes the epoch and waits for the helpers, also when `f` panics on this thread
        struct Close<'a>(&'a Team);
        impl Drop for Close<'_> {
            fn drop(&mut self) {
                let t = self.0;
                let s = t.state.fetch_or(CLOSED, Ordering::AcqRel);
                let joined = (s & JOINED) as u32;
                // The helpers that joined are finishing their last chunks: spin, then spin and
                // yield, then sleep, so that a helper the scheduler took off its core can have
                // this one.
                let start = Instant::now();
                let mut spins = 0u32;
                while t.done.load(Ordering::Acquire) != joined {
                    spins = spins.wrapping_add(1);
                    let waited = (spins % 64 == 0).then(|| start.elapsed());
                    if waited.is_some_and(|w| w >= FINISH_SPIN) {
                        if waited.is_some_and(|w| w < t.spin) {
                            // a helper late to its last chunk: keep waiting awake, but let a
                            // helper that shares this core run
                            std::thread::yield_now();
                            continue;
                        }
                        let mut park = t.park.lock().unwrap_or_else(|e| e.into_inner());
                        t.waiting.store(true, Ordering::SeqCst);
                        while t.done.load(Ordering::SeqCst) != joined {
                            park = t.finish.wait(park).unwrap_or_else(|e| e.into_inner());
                        }
                        t.waiting.store(false, Ordering::Relaxed);
                        break;
                    }
                    std::hint::spin_loop();
                }
            }
        }
        let close = Close(self);
        job.work();
        drop(close);
        if job.panicked.load(Ordering::Relaxed) {
            panic!("a kernel thread panicked");
        }
        true
    }

    /// A helper thread's loop: wait for a new epoch (spinning, then sleeping), join it while it
    /// is open, run chunks, count itself done.
    fn helper(&'static self) {
        let _ = IN_JOB.try_with(|c| c.set(true));
        let mut seen = self.state.load(Ordering::Acquire) >> 32;
        loop {
            let mut s = self.wait_new_epoch(seen);
            seen = s >> 32;
            // join while this epoch is open
            while s >> 32 == seen && s & CLOSED == 0 {
                match self.state.compare_exchange_weak(
                    s,
                    s + 1,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => {
                        // SAFETY: joined an open epoch: its caller waits for `done` before
                        // the job goes away.
                        let job = unsafe { &*self.job.load(Ordering::Relaxed) };
                        if catch_unwind(AssertUnwindSafe(|| job.work())).is_err() {
                            job.panicked.store(true, Ordering::Relaxed);
                            // the remaining chunks go to the others
                        }
                        self.done.fetch_add(1, Ordering::SeqCst);
                        if self.waiting.load(Ordering::SeqCst) {
                            let _park = self.park.lock().unwrap_or_else(|e| e.into_inner());
                            self.finish.notify_one();
                        }
                        break;
                    }
                    Err(now) => s = now,
                }
            }
        }
    }

    /// Spins up to `spin`, then sleeps, until the epoch differs from `seen`; returns the state.
    fn wait_new_epoch(&self, seen: u64) -> u64 {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            let s = self.state.load(Ordering::Acquire);
            if s >> 32 != seen {
                return s;
            }
            spins = spins.wrapping_add(1);
            if spins % 128 == 0 && start.elapsed() >= self.spin {
                break;
            }
            std::hint::spin_loop();
        }
        let mut park = self.park.lock().unwrap_or_else(|e| e.into_inner());
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        let s = loop {
            let s = self.state.load(Ordering::SeqCst);
            if s >> 32 != seen {
                break s;
            }
            park = self.wake.wait(park).unwrap_or_else(|e| e.into_inner());
        };
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `t.run` until it is not refused (other tests share the team).
    fn run(t: &Team, count: usize, f: &(dyn Fn(usize) + Sync)) {
        while !t.run(count, f) {
            std::thread::yield_now();
        }
    }

    #[test]
    fn every_chunk_runs_once_and_nested_loops_stay_serial() {
        let Some(t) = team(1) else { return };
        for count in [0usize, 1, 2, 7, 100] {
            let hits: Vec<AtomicU32> = (0..count).map(|_| AtomicU32::new(0)).collect();
            let nested = AtomicBool::new(false);
            run(t, count, &|c| {
                hits[c].fetch_add(1, Ordering::Relaxed);
                if in_job() {
                    nested.store(true, Ordering::Relaxed);
                }
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
            assert!(count == 0 || nested.load(Ordering::Relaxed));
        }
        assert!(!in_job());
    }

    #[test]
    fn a_panicking_chunk_reaches_the_caller_and_the_team_still_works() {
        let Some(t) = team(1) else { return };
        for _ in 0..20 {
            let r = catch_unwind(AssertUnwindSafe(|| {
                run(t, 8, &|c| {
                    if c == 5 {
                        panic!("chunk 5");
                    }
                })
            }));
            assert!(r.is_err());
        }
        let sum = AtomicUsize::new(0);
        run(t, 1000, &|c| {
            sum.fetch_add(c, Ordering::Relaxed);
        });
        assert_eq!(sum.load(Ordering::Relaxed), 999 * 1000 / 2);
    }

    #[test]
    fn the_caller_sleeps_until_a_slow_helper_finishes() {
        let Some(t) = team(1) else { return };
        for _ in 0..20 {
            let hits = AtomicUsize::new(0);
            run(t, 4, &|_| {
                // a helper's chunk outlasts the caller's spin, so the caller goes to sleep
                // and the helper's notify must wake it
                if std::thread::current()
                    .name()
                    .is_some_and(|n| n.starts_with("anyffi-team-"))
                {
                    std::thread::sleep(Duration::from_millis(2));
                }
                hits.fetch_add(1, Ordering::Relaxed);
            });
            assert_eq!(hits.load(Ordering::Relaxed), 4);
        }
    }

    #[test]
    fn concurrent_callers_are_refused_not_blocked() {
        let Some(t) = team(1) else { return };
        let refused = AtomicUsize::new(0);
        let total = AtomicUsize::new(0);
        std::thread::scope(|sc| {
            for _ in 0..4 {
                sc.spawn(|| {
                    for _ in 0..2000 {
                        if t.run(4, &|c| {
                            total.fetch_add(c + 1, Ordering::Relaxed);
                        }) {
                            continue;
                        }
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        });
        let ran = 4 * 2000 - refused.load(Ordering::Relaxed);
        assert_eq!(total.load(Ordering::Relaxed), ran * 10);
    }
}
