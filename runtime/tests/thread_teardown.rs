//! Ops called while a thread's storage is torn down (a thread-local destructor of the host
//! calling in after the runtime's per-thread caches are gone) compute the same results as
//! before, instead of failing on the destroyed caches (plan caches of linear/gemm, scratch
//! buffers, rope's denominators, the current device).

mod ops_common;

use std::sync::Mutex;

use ops_common::*;
use tvm_ffi::anyffi::AnyView;

type Outcome = (String, Result<Vec<f64>, String>);

/// Small calls (they run on the calling thread) of every op with per-thread state.
fn run_all() -> Vec<Outcome> {
    let mut out = Vec::new();
    let mut rng = Rng::new(5);
    let mut one =
        |name: &str, op: &str, mut ts: Vec<HostTensor>, scalars: Vec<AnyView<'static>>| {
            let mut args: Vec<AnyView<'_>> = ts.iter().map(|t| t.view()).collect();
            args.extend(scalars);
            let r = call(op, &args)
                .map(|_| ts.remove(0).get())
                .map_err(|e| format!("{}: {}", e.kind(), e.message()));
            out.push((name.to_string(), r));
        };
    for dt in [Dt::F32, Dt::BF16] {
        let (x, _) = rand_tensor(&mut rng, &[3, 40], dt, 1.0, 0.0);
        let (w, _) = rand_tensor(&mut rng, &[24, 40], dt, 1.0, 0.0);
        let (b, _) = rand_tensor(&mut rng, &[24], dt, 1.0, 0.0);
        let y = HostTensor::new(&[3, 24], dt);
        one(
            &format!("linear {dt:?}"),
            "ops.linear",
            vec![y, x, w, b],
            vec![],
        );
    }
    let (a, _) = rand_tensor(&mut rng, &[2, 8, 16], Dt::F32, 1.0, 0.0);
    let (b, _) = rand_tensor(&mut rng, &[2, 16, 8], Dt::F32, 1.0, 0.0);
    let c = HostTensor::new(&[2, 8, 8], Dt::F32);
    one(
        "gemm",
        "ops.gemm",
        vec![c, a, b],
        vec![AnyView::from(1.5), AnyView::from(0.0)],
    );
    let (x, _) = rand_tensor(&mut rng, &[4, 2, 32], Dt::F32, 1.0, 0.0);
    let mut pos = HostTensor::new(&[4], Dt::I64);
    pos.set(&[0.0, 3.0, 7.0, 100.0]);
    let y = HostTensor::new(&[4, 2, 32], Dt::F32);
    one(
        "rope",
        "ops.rope",
        vec![y, x, pos],
        vec![AnyView::from(10000.0)],
    );
    for dt in [Dt::F32, Dt::BF16] {
        let (q, _) = rand_tensor(&mut rng, &[1, 6, 32], dt, 1.0, 0.0);
        let (k, _) = rand_tensor(&mut rng, &[20, 2, 32], dt, 1.0, 0.0);
        let (v, _) = rand_tensor(&mut rng, &[20, 2, 32], dt, 1.0, 0.0);
        let o = HostTensor::new(&[1, 6, 32], dt);
        one(
            &format!("self_attention {dt:?}"),
            "ops.self_attention",
            vec![o, q, k, v],
            vec![AnyView::from(0.17)],
        );
    }
    out
}

static LATE_RESULTS: Mutex<Vec<Outcome>> = Mutex::new(Vec::new());

/// A host thread-local whose destructor calls the ops.
struct CallsOnDrop;

impl Drop for CallsOnDrop {
    fn drop(&mut self) {
        let r = run_all();
        LATE_RESULTS.lock().unwrap().extend(r);
    }
}

thread_local! {
    static LATE: CallsOnDrop = const { CallsOnDrop };
}

#[test]
fn ops_in_a_thread_local_destructor_after_the_caches_are_gone() {
    setup();
    let first = std::thread::spawn(|| {
        // registered first, so destroyed after the runtime's thread-locals (which the first
        // op calls below register): its destructor finds them gone
        LATE.with(|_| {});
        run_all()
    })
    .join()
    .unwrap();
    let late = std::mem::take(&mut *LATE_RESULTS.lock().unwrap());
    assert_eq!(late.len(), first.len(), "the destructor ran every call");
    for ((name, want), (_, got)) in first.iter().zip(&late) {
        let want = want
            .as_ref()
            .unwrap_or_else(|e| panic!("{name} (live thread): {e}"));
        let got = got
            .as_ref()
            .unwrap_or_else(|e| panic!("{name} (thread teardown): {e}"));
        assert_eq!(got, want, "{name}: the same result during teardown");
    }
}
