//! Operators called from several threads at once: one thread's parallel loop holds the
//! kernels' team while the others' go to the rayon pool (or run nested loops serially); every
//! result must be what a lone call gives.

mod ops_common;

use ops_common::*;
use tvm_ffi::anyffi::AnyView;

#[test]
fn ops_from_several_threads_at_once_match_lone_calls() {
    setup();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            s.spawn(move || {
                let mut rng = Rng::new(100 + t);
                // sizes past the serial threshold, so each call runs a parallel loop
                let shape = [256i64, 1024];
                let (a, av) = rand_tensor(&mut rng, &shape, Dt::F32, 1.0, 0.0);
                let (b, bv) = rand_tensor(&mut rng, &shape, Dt::F32, 1.0, 0.0);
                let c = HostTensor::new(&shape, Dt::F32);
                let sum: Vec<f64> = av
                    .iter()
                    .zip(&bv)
                    .map(|(x, y)| Dt::F32.round(x + y))
                    .collect();
                let (x, _) = rand_tensor(&mut rng, &[64, 256], Dt::F32, 1.0, 0.0);
                let (w, _) = rand_tensor(&mut rng, &[512, 256], Dt::F32, 0.1, 0.0);
                let y = HostTensor::new(&[64, 512], Dt::F32);
                let (q, _) = rand_tensor(&mut rng, &[1, 12, 128], Dt::F32, 1.0, 0.0);
                let (k, _) = rand_tensor(&mut rng, &[1024, 2, 128], Dt::F32, 1.0, 0.0);
                let (v, _) = rand_tensor(&mut rng, &[1024, 2, 128], Dt::F32, 1.0, 0.0);
                let o = HostTensor::new(&[1, 12, 128], Dt::F32);
                let (big, bigv) = rand_tensor(&mut rng, &[151_936], Dt::F32, 1.0, 0.0);
                let idx = HostTensor::new(&[1], Dt::I64);
                let val = HostTensor::new(&[1], Dt::F32);
                let best = (0..bigv.len()).fold(0, |m, i| if bigv[i] > bigv[m] { i } else { m });
                let scale = AnyView::from(1.0 / (128f64).sqrt());
                let mut first = None;
                for round in 0..40 {
                    call("ops.add", &[c.view(), a.view(), b.view()]).unwrap();
                    assert_eq!(c.get(), sum, "add, thread {t} round {round}");
                    call("ops.argmax", &[idx.view(), val.view(), big.view()]).unwrap();
                    assert_eq!(idx.get()[0] as usize, best, "argmax, thread {t}");
                    call("ops.linear", &[y.view(), x.view(), w.view(), AnyView::NONE]).unwrap();
                    call(
                        "ops.self_attention",
                        &[o.view(), q.view(), k.view(), v.view(), scale],
                    )
                    .unwrap();
                    let now = (y.get(), o.get());
                    match &first {
                        None => first = Some(now),
                        Some(f) => assert!(*f == now, "linear/attention, thread {t} round {round}"),
                    }
                }
            });
        }
    });
}
