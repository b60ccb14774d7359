//! InfiniCore-style cases (spec §6.2): strided and batched layouts, gemm with alpha/beta,
//! mixed-precision rms_norm weights, rearrange, and every SIMD level against the same answers.

mod ops_common;

use ops_common::*;
use tvm_ffi::anyffi::AnyView;

fn strided_rand(
    rng: &mut Rng,
    shape: &[i64],
    strides: Option<&[i64]>,
    dt: Dt,
    scale: f64,
) -> (HostTensor, Vec<f64>) {
    let mut t = match strides {
        Some(s) => HostTensor::strided(shape, s, dt),
        None => HostTensor::new(shape, dt),
    };
    let v = t.rand(rng, scale, 0.0);
    (t, v)
}

#[test]
fn rms_norm_strided_and_mixed_precision() {
    let mut rng = Rng::new(11);
    let cases: &[(&[i64], Option<&[i64]>)] = &[
        (&[1, 4], None),
        (&[2, 4], None),
        (&[2, 2, 4], None),
        (&[2, 2, 4], Some(&[12, 8, 1])),
        (&[16, 2048], None),
        (&[16, 2048], Some(&[4096, 1])),
        (&[4, 4, 2048], Some(&[2048, 8192, 1])),
        (&[15, 3584], None),
        // rows past 2730 elements (f32, and bf16 with bf16 weights) go in groups with a
        // weight block in registers: padded and
        // permuted rows, column tails (3000 = 11 blocks of 256 + 184; 2900 % 16 = 4), groups
        // of 8 and a remainder
        (&[21, 2900], Some(&[3100, 1])),
        (&[4, 4, 3000], Some(&[3000, 12000, 1])),
        (&[19, 8192], None),
    ];
    for &(shape, strides) in cases {
        for (dt, wdt, tol) in [
            (Dt::F32, Dt::F32, (1e-5, 1e-4)),
            (Dt::F16, Dt::F16, (2e-3, 2e-3)),
            (Dt::F16, Dt::F32, (2e-3, 2e-3)),
            (Dt::BF16, Dt::BF16, (1e-2, 1e-2)),
            (Dt::BF16, Dt::F32, (1e-2, 1e-2)),
        ] {
            let d = *shape.last().unwrap() as usize;
            let (x, xv) = strided_rand(&mut rng, shape, strides, dt, 1.0);
            let (w, wv) = strided_rand(&mut rng, &[d as i64], None, wdt, 1.0);
            let y = match strides {
                Some(s) => HostTensor::strided(shape, s, dt),
                None => HostTensor::new(shape, dt),
            };
            call(
                "ops.rms_norm",
                &[y.view(), x.view(), w.view(), AnyView::from(1e-6)],
            )
            .unwrap();
            let rows = xv.len() / d;
            let mut want = vec![0.0; xv.len()];
            for r in 0..rows {
                let row = &xv[r * d..][..d];
                let inv = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / d as f64 + 1e-6).sqrt();
                for j in 0..d {
                    want[r * d + j] = wv[j] * row[j] * inv;
                }
            }
            assert_close(
                &format!("rms_norm {shape:?} {strides:?} {dt:?}/{wdt:?}"),
                &y.get(),
                &want,
                tol.0,
                tol.1,
            );
        }
    }
}

#[test]
fn rope_strided() {
    let mut rng = Rng::new(12);
    // [seq, nhead, d] views with InfiniCore-like strides (q/k slices of a fused qkv buffer)
    let cases: &[(&[i64], &[i64], &[i64])] = &[
        (&[20, 16, 128], &[8192, 256, 1], &[8192, 256, 1]),
        (&[50, 32, 8], &[1024, 16, 1], &[1536, 24, 1]),
        (&[20, 4, 64], &[64, 262144 / 64, 1], &[256, 64, 1]),
        (&[17, 32, 64], &[8192, 128, 1], &[12288, 192, 1]),
    ];
    for &(shape, xs, ys) in cases {
        for dt in FLOATS {
            let (x, xv) = strided_rand(&mut rng, shape, Some(xs), dt, 1.0);
            let mut pos = HostTensor::new(&[shape[0]], Dt::I32);
            let pv: Vec<f64> = (0..shape[0]).map(|i| (i * 3 + 1) as f64).collect();
            pos.set(&pv);
            let y = HostTensor::strided(shape, ys, dt);
            call(
                "ops.rope",
                &[y.view(), x.view(), pos.view(), AnyView::from(1e5)],
            )
            .unwrap();
            let (seq, nh, d) = (shape[0] as usize, shape[1] as usize, shape[2] as usize);
            let mut want = vec![0.0; xv.len()];
            for i in 0..seq {
                for j in 0..d / 2 {
                    let den = (1e5f32).powf((2 * j) as f32 / d as f32);
                    let (s, c) = ((pv[i] as f32 / den) as f64).sin_cos();
                    for hd in 0..nh {
                        let b = (i * nh + hd) * d;
                        want[b + j] = xv[b + j] * c - xv[b + d / 2 + j] * s;
                        want[b + d / 2 + j] = xv[b + d / 2 + j] * c + xv[b + j] * s;
                    }
                }
            }
            let tol = if dt == Dt::F32 { 1e-4 } else { dt.tol() };
            assert_close(&format!("rope {shape:?} {dt:?}"), &y.get(), &want, tol, tol);
        }
    }
}

#[test]
fn swiglu_and_add_strided() {
    let mut rng = Rng::new(13);
    let cases: &[(&[i64], Option<&[i64]>, Option<&[i64]>, Option<&[i64]>)] = &[
        (&[2, 4], None, None, None),
        (&[2, 4, 8], None, None, None),
        (
            &[1, 2048],
            Some(&[4096, 1]),
            Some(&[4096, 1]),
            Some(&[4096, 1]),
        ),
        (
            &[6, 2560],
            Some(&[2048, 1]),
            Some(&[1, 2048]),
            Some(&[2560, 1]),
        ),
        (&[4, 48, 6], None, None, None),
    ];
    for &(shape, sa, sb, sc) in cases {
        for dt in FLOATS {
            let (a, av) = strided_rand(&mut rng, shape, sa, dt, 1.0);
            let (b, bv) = strided_rand(&mut rng, shape, sb, dt, 1.0);
            let c = match sc {
                Some(s) => HostTensor::strided(shape, s, dt),
                None => HostTensor::new(shape, dt),
            };
            call("ops.swiglu", &[c.view(), a.view(), b.view()]).unwrap();
            let want: Vec<f64> = av
                .iter()
                .zip(&bv)
                .map(|(g, u)| u * g / (1.0 + (-g).exp()))
                .collect();
            let tol = if dt == Dt::BF16 {
                (5e-3, 1e-2)
            } else {
                (dt.tol(), dt.tol())
            };
            assert_close(
                &format!("swiglu {shape:?} {dt:?}"),
                &c.get(),
                &want,
                tol.0,
                tol.1,
            );
            call("ops.add", &[c.view(), a.view(), b.view()]).unwrap();
            let want: Vec<f64> = av.iter().zip(&bv).map(|(x, y)| dt.round(x + y)).collect();
            assert_close(&format!("add {shape:?} {dt:?}"), &c.get(), &want, 0.0, 0.0);
        }
    }
}

/// f64 reference of C = alpha A B + beta C0 for 2-D/3-D with batch broadcast.
#[allow(clippy::too_many_arguments)]
fn gemm_ref(
    a: &[f64],
    b: &[f64],
    c0: &[f64],
    bat: usize,
    ab: usize,
    bb: usize,
    m: usize,
    n: usize,
    k: usize,
    alpha: f64,
    beta: f64,
) -> Vec<f64> {
    let mut out = vec![0.0; bat * m * n];
    for z in 0..bat {
        let (za, zb) = (if ab == 1 { 0 } else { z }, if bb == 1 { 0 } else { z });
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0;
                for t in 0..k {
                    s += a[(za * m + i) * k + t] * b[(zb * k + t) * n + j];
                }
                let c = if beta == 0.0 {
                    0.0
                } else {
                    beta * c0[(z * m + i) * n + j]
                };
                out[(z * m + i) * n + j] = alpha * s + c;
            }
        }
    }
    out
}

#[test]
fn gemm_cases() {
    let mut rng = Rng::new(14);
    // (alpha, beta, a shape, b shape, c shape, a strides, b strides, c strides)
    type S<'a> = Option<&'a [i64]>;
    let cases: &[(f64, f64, &[i64], &[i64], &[i64], S, S, S)] = &[
        (
            1.0,
            0.0,
            &[1, 2048],
            &[2048, 2048],
            &[1, 2048],
            None,
            None,
            None,
        ),
        (
            1.0,
            0.0,
            &[2, 4, 2048],
            &[2, 2048, 2048],
            &[2, 4, 2048],
            None,
            None,
            None,
        ),
        (
            1.0,
            0.0,
            &[1, 2048],
            &[2048, 2048],
            &[1, 2048],
            Some(&[4096, 1]),
            Some(&[4096, 1]),
            Some(&[4096, 1]),
        ),
        (
            1.0,
            1.0,
            &[6, 2048],
            &[2048, 2560],
            &[6, 2560],
            Some(&[2048, 1]),
            Some(&[1, 2048]),
            Some(&[2560, 1]),
        ),
        (
            1.0 / 8.0,
            0.0,
            &[4, 48, 64],
            &[4, 64, 6],
            &[4, 48, 6],
            None,
            None,
            None,
        ),
        (2.5, 0.5, &[3, 5, 7], &[7, 9], &[3, 5, 9], None, None, None),
        (
            1.0,
            0.0,
            &[1, 5, 7],
            &[3, 7, 9],
            &[3, 5, 9],
            None,
            None,
            None,
        ),
        (
            1.0,
            1.0,
            &[33, 65],
            &[65, 17],
            &[33, 17],
            Some(&[1, 33]),
            None,
            Some(&[1, 33]),
        ),
        // one row over a K of three `gemm`-crate blocks (row-major B), into a strided C
        (
            2.0,
            0.5,
            &[1, 10000],
            &[10000, 5],
            &[1, 5],
            None,
            None,
            Some(&[10, 2]),
        ),
    ];
    for &(alpha, beta, ash, bsh, csh, sa, sb, sc) in cases {
        for dt in FLOATS {
            let (a, av) = strided_rand(&mut rng, ash, sa, dt, 1.0);
            let (b, bv) = strided_rand(&mut rng, bsh, sb, dt, 1.0);
            let mut c = match sc {
                Some(s) => HostTensor::strided(csh, s, dt),
                None => HostTensor::new(csh, dt),
            };
            let c0 = if beta != 0.0 {
                c.rand(&mut rng, 1.0, 0.0)
            } else {
                vec![0.0; c.numel()]
            };
            call(
                "ops.gemm",
                &[
                    c.view(),
                    a.view(),
                    b.view(),
                    AnyView::from(alpha),
                    AnyView::from(beta),
                ],
            )
            .unwrap();
            let nd = csh.len();
            let (m, n) = (csh[nd - 2] as usize, csh[nd - 1] as usize);
            let k = ash[ash.len() - 1] as usize;
            let bat = if nd == 3 { csh[0] as usize } else { 1 };
            let ab = if ash.len() == 3 { ash[0] as usize } else { 1 };
            let bb = if bsh.len() == 3 { bsh[0] as usize } else { 1 };
            let want = gemm_ref(&av, &bv, &c0, bat, ab, bb, m, n, k, alpha, beta);
            // sums of k products of [0,1) values grow like k/4: relative tolerance
            let tol = match dt {
                Dt::F32 => (1e-4, 1e-4),
                Dt::F16 => (1e-2, 2e-3),
                _ => (5e-2, 1e-2),
            };
            assert_close(
                &format!("gemm {ash:?}x{bsh:?} {dt:?}"),
                &c.get(),
                &want,
                tol.0,
                tol.1,
            );
        }
    }
}

#[test]
fn linear_batched_and_strided_rows() {
    let mut rng = Rng::new(15);
    for dt in FLOATS {
        // x [2, 5, 256] -> y [2, 5, 512], bias; x rows strided (a slice of a wider buffer)
        let (x, xv) = strided_rand(&mut rng, &[2, 5, 256], None, dt, 0.1);
        let (w, wv) = strided_rand(&mut rng, &[512, 256], None, dt, 0.01);
        let (b, bv) = strided_rand(&mut rng, &[512], None, dt, 1.0);
        let y = HostTensor::strided(&[2, 5, 512], &[5 * 600, 600, 1], dt);
        call("ops.linear", &[y.view(), x.view(), w.view(), b.view()]).unwrap();
        let mut want = vec![0.0; 10 * 512];
        for r in 0..10 {
            for j in 0..512 {
                want[r * 512 + j] = (0..256)
                    .map(|t| xv[r * 256 + t] * wv[j * 256 + t])
                    .sum::<f64>()
                    + bv[j];
            }
        }
        assert_close(
            &format!("linear batched {dt:?}"),
            &y.get(),
            &want,
            dt.tol(),
            dt.tol(),
        );
        // M = 1 with a strided weight (rows of a wider matrix)
        let (w2, wv2) = strided_rand(&mut rng, &[300, 64], Some(&[100, 1]), dt, 0.01);
        let (x2, xv2) = strided_rand(&mut rng, &[1, 64], None, dt, 0.1);
        let y2 = HostTensor::new(&[1, 300], dt);
        call(
            "ops.linear",
            &[y2.view(), x2.view(), w2.view(), AnyView::NONE],
        )
        .unwrap();
        let want2: Vec<f64> = (0..300)
            .map(|j| (0..64).map(|t| xv2[t] * wv2[j * 64 + t]).sum())
            .collect();
        assert_close(
            &format!("linear gemv strided W {dt:?}"),
            &y2.get(),
            &want2,
            dt.tol(),
            dt.tol(),
        );
    }
}

#[test]
fn rearrange_layouts() {
    let mut rng = Rng::new(16);
    let cases: &[(&[i64], &[i64], &[i64])] = &[
        (&[3, 4, 5], &[20, 5, 1], &[1, 3, 12]),
        (&[32, 8, 64], &[64, 2048, 1], &[512, 64, 1]),
        (&[2, 3, 4, 5], &[60, 20, 5, 1], &[60, 1, 15, 3]),
        (&[100, 100], &[1, 100], &[100, 1]),
        (&[7], &[3], &[1]),
    ];
    for &(shape, si, so) in cases {
        for dt in [Dt::F32, Dt::BF16, Dt::I64] {
            let (inp, iv) = strided_rand(&mut rng, shape, Some(si), dt, 100.0);
            let out = HostTensor::strided(shape, so, dt);
            call("ops.rearrange", &[out.view(), inp.view()]).unwrap();
            assert_close(
                &format!("rearrange {shape:?} {dt:?}"),
                &out.get(),
                &iv,
                0.0,
                0.0,
            );
        }
    }
}

#[test]
fn every_simd_level_agrees() {
    use tvm_ffi::kernels::cpu::simd::{force_level, level_lock, Level};
    let _level = level_lock();
    let mut rng = Rng::new(17);
    let d = 4096usize + 13;
    let di = d as i64;
    for dt in FLOATS {
        let (a, _) = rand_tensor(&mut rng, &[3, di], dt, 2.0, -1.0);
        let (b, _) = rand_tensor(&mut rng, &[3, di], dt, 2.0, -1.0);
        let (w, _) = rand_tensor(&mut rng, &[di], dt, 1.0, 0.0);
        let (wm, _) = rand_tensor(&mut rng, &[37, di], dt, 0.01, 0.0);
        let (q, _) = rand_tensor(&mut rng, &[1, 12, 128], dt, 1.0, 0.0);
        let (kc, _) = rand_tensor(&mut rng, &[600, 2, 128], dt, 1.0, 0.0);
        let (vc, _) = rand_tensor(&mut rng, &[600, 2, 128], dt, 1.0, 0.0);
        let mut pos = HostTensor::new(&[3], Dt::I64);
        pos.set(&[5.0, 700.0, 100_000.0]);
        let mut outs: Vec<Vec<Vec<f64>>> = Vec::new();
        for lv in [Level::Scalar, Level::Avx2, Level::Avx512, Level::Avx512Bf16] {
            force_level(lv);
            let y1 = HostTensor::new(&[3, di], dt);
            call("ops.add", &[y1.view(), a.view(), b.view()]).unwrap();
            let y2 = HostTensor::new(&[3, di], dt);
            call("ops.swiglu", &[y2.view(), a.view(), b.view()]).unwrap();
            let y3 = HostTensor::new(&[3, di], dt);
            call(
                "ops.rms_norm",
                &[y3.view(), a.view(), w.view(), AnyView::from(1e-6)],
            )
            .unwrap();
            let y4 = HostTensor::new(&[3, 1, di - 1], dt);
            let a3 = HostTensor::strided(&[3, 1, di - 1], &[di, di, 1], dt);
            let mut a3 = a3;
            a3.set(
                &a.get()
                    .chunks(d)
                    .flat_map(|r| r[..d - 1].to_vec())
                    .collect::<Vec<_>>(),
            );
            call(
                "ops.rope",
                &[y4.view(), a3.view(), pos.view(), AnyView::from(1e4)],
            )
            .unwrap();
            let y5 = HostTensor::new(&[1, 37], dt);
            let x5 = HostTensor::strided(&[1, di], &[di, 1], dt);
            let mut x5 = x5;
            x5.set(&a.get()[..d]);
            call(
                "ops.linear",
                &[y5.view(), x5.view(), wm.view(), AnyView::NONE],
            )
            .unwrap();
            let y6 = HostTensor::new(&[1, 12, 128], dt);
            call(
                "ops.self_attention",
                &[
                    y6.view(),
                    q.view(),
                    kc.view(),
                    vc.view(),
                    AnyView::from(0.088),
                ],
            )
            .unwrap();
            outs.push(vec![
                y1.get(),
                y2.get(),
                y3.get(),
                y4.get(),
                y5.get(),
                y6.get(),
            ]);
        }
        force_level(Level::Avx512Bf16);
        let names = ["add", "swiglu", "rms_norm", "rope", "linear", "attention"];
        for lv in 1..outs.len() {
            for (o, name) in names.iter().enumerate() {
                // one rounding of the output dtype apart at most (FMA vs mul+add, lane order)
                let tol = match dt {
                    Dt::F32 => 1e-5,
                    Dt::F16 => 2e-3,
                    _ => 1.6e-2,
                };
                assert_close(
                    &format!("{name} {dt:?} level {lv} vs scalar"),
                    &outs[lv][o],
                    &outs[0][o],
                    tol,
                    tol,
                );
            }
        }
    }
}
