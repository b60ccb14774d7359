//! The LLAISYS operator vectors (spec §6.1) in f32, f16 and bf16, against f64 references
//! computed from the same rounded inputs, plus decode-shaped attention, causal masking and
//! argmax ties.

mod ops_common;

use ops_common::*;
use tvm_ffi::anyffi::AnyView;

#[test]
fn add_vectors() {
    let mut rng = Rng::new(1);
    for dt in FLOATS {
        for shape in [[2i64, 3], [512, 4096]] {
            let (a, av) = rand_tensor(&mut rng, &shape, dt, 1.0, 0.0);
            let (b, bv) = rand_tensor(&mut rng, &shape, dt, 1.0, 0.0);
            let c = HostTensor::new(&shape, dt);
            call("ops.add", &[c.view(), a.view(), b.view()]).unwrap();
            let want: Vec<f64> = av.iter().zip(&bv).map(|(x, y)| dt.round(x + y)).collect();
            let tol = if dt == Dt::F32 { 1e-5 } else { 1e-3 };
            assert_close(&format!("add {dt:?} {shape:?}"), &c.get(), &want, tol, tol);
        }
        // in place: a = a + b
        let (a, av) = rand_tensor(&mut rng, &[3, 5], dt, 1.0, 0.0);
        let (b, bv) = rand_tensor(&mut rng, &[3, 5], dt, 1.0, 0.0);
        call("ops.add", &[a.view(), a.view(), b.view()]).unwrap();
        let want: Vec<f64> = av.iter().zip(&bv).map(|(x, y)| dt.round(x + y)).collect();
        assert_close("add in place", &a.get(), &want, 0.0, 0.0);
    }
}

#[test]
fn argmax_vectors_and_ties() {
    let mut rng = Rng::new(2);
    for dt in FLOATS {
        for n in [4i64, 4096, 151_936] {
            let (v, vv) = rand_tensor(&mut rng, &[n], dt, 1.0, 0.0);
            let idx = HostTensor::new(&[1], Dt::I64);
            let val = HostTensor::new(&[1], dt);
            call("ops.argmax", &[idx.view(), val.view(), v.view()]).unwrap();
            let mut best = 0;
            for (i, &x) in vv.iter().enumerate() {
                if x > vv[best] {
                    best = i;
                }
            }
            assert_eq!(idx.get()[0] as usize, best, "argmax {dt:?} n={n}");
            assert_eq!(val.get()[0], vv[best]);
        }
        // ties: the first maximal index wins, also across the parallel split
        let mut v = HostTensor::new(&[4], dt);
        v.set(&[1.0, 3.0, 3.0, 2.0]);
        let idx = HostTensor::new(&[1], Dt::I64);
        let val = HostTensor::new(&[1], dt);
        call("ops.argmax", &[idx.view(), val.view(), v.view()]).unwrap();
        assert_eq!((idx.get()[0], val.get()[0]), (1.0, 3.0));
        let n = 200_000usize;
        let mut big = HostTensor::new(&[n as i64], dt);
        let mut vals = vec![0.5; n];
        vals[70_001] = 2.0;
        vals[150_000] = 2.0;
        vals[190_000] = 2.0;
        big.set(&vals);
        call("ops.argmax", &[idx.view(), val.view(), big.view()]).unwrap();
        assert_eq!(idx.get()[0], 70_001.0, "first of the tied maxima");
        vals[100_000] = f64::NAN;
        big.set(&vals);
        call("ops.argmax", &[idx.view(), val.view(), big.view()]).unwrap();
        assert_eq!(idx.get()[0], 100_000.0, "NaN propagates as torch.max does");
    }
}

#[test]
fn embedding_vectors() {
    let mut rng = Rng::new(3);
    for dt in FLOATS {
        for ((n,), (v, d)) in [((1i64,), (2i64, 3i64)), ((50,), (512, 4096))] {
            let (w, wv) = rand_tensor(&mut rng, &[v, d], dt, 1.0, 0.0);
            for idt in [Dt::I64, Dt::I32] {
                let mut idx = HostTensor::new(&[n], idt);
                let iv: Vec<f64> = (0..n).map(|_| rng.below(v as u64) as f64).collect();
                idx.set(&iv);
                let out = HostTensor::new(&[n, d], dt);
                call("ops.embedding", &[out.view(), idx.view(), w.view()]).unwrap();
                let want: Vec<f64> = iv
                    .iter()
                    .flat_map(|&i| wv[i as usize * d as usize..][..d as usize].to_vec())
                    .collect();
                assert_close("embedding (strict)", &out.get(), &want, 0.0, 0.0);
            }
        }
    }
}

/// f64 reference of Y = X W^T + b at sampled positions (all when small).
fn linear_ref(
    x: &[f64],
    w: &[f64],
    b: Option<&[f64]>,
    m: usize,
    n: usize,
    k: usize,
    i: usize,
    j: usize,
) -> f64 {
    let _ = m;
    let mut s = 0.0;
    for t in 0..k {
        s += x[i * k + t] * w[j * k + t];
    }
    s + b.map_or(0.0, |b| b[j]) + 0.0 * n as f64
}

fn check_linear(rng: &mut Rng, dt: Dt, m: usize, n: usize, k: usize, bias: bool, samples: usize) {
    let (x, xv) = rand_tensor(rng, &[m as i64, k as i64], dt, 0.1, 0.0);
    let (w, wv) = rand_tensor(rng, &[n as i64, k as i64], dt, 0.01, 0.0);
    let (b, bv) = rand_tensor(rng, &[n as i64], dt, 1.0, 0.0);
    let out = HostTensor::new(&[m as i64, n as i64], dt);
    let bview = if bias { b.view() } else { AnyView::NONE };
    call("ops.linear", &[out.view(), x.view(), w.view(), bview]).unwrap();
    let got = out.get();
    let tol = dt.tol();
    let pts: Vec<(usize, usize)> = if m * n <= samples {
        (0..m * n).map(|p| (p / n, p % n)).collect()
    } else {
        (0..samples)
            .map(|_| (rng.below(m as u64) as usize, rng.below(n as u64) as usize))
            .collect()
    };
    let bref = if bias { Some(&bv[..]) } else { None };
    let g: Vec<f64> = pts.iter().map(|&(i, j)| got[i * n + j]).collect();
    let want: Vec<f64> = pts
        .iter()
        .map(|&(i, j)| linear_ref(&xv, &wv, bref, m, n, k, i, j))
        .collect();
    assert_close(
        &format!("linear {dt:?} m={m} n={n} k={k} bias={bias}"),
        &g,
        &want,
        tol,
        tol,
    );
    assert!(
        got.iter().all(|v| !v.is_nan()),
        "every output element written"
    );
}

#[test]
fn linear_vectors() {
    let mut rng = Rng::new(4);
    for dt in FLOATS {
        check_linear(&mut rng, dt, 2, 3, 4, true, usize::MAX);
        check_linear(&mut rng, dt, 512, 4096, 4096, true, 3000);
        check_linear(&mut rng, dt, 2, 3, 4, false, usize::MAX);
        // decoding shapes: one row (GEMV), odd sizes for the tails
        check_linear(&mut rng, dt, 1, 1536, 1536, true, usize::MAX);
        check_linear(&mut rng, dt, 1, 37, 75, false, usize::MAX);
        check_linear(&mut rng, dt, 3, 515, 77, true, usize::MAX);
        // packed-kernel edges: rows, columns and K not multiples of 12 / 32 / 16
        check_linear(&mut rng, dt, 50, 37, 33, true, usize::MAX);
        check_linear(&mut rng, dt, 97, 70, 300, false, usize::MAX);
        // few rows (dot-product tiles; half W read in its own dtype): K off the 16-wide pairs
        check_linear(&mut rng, dt, 20, 133, 1000, true, usize::MAX);
        check_linear(&mut rng, dt, 47, 9, 35, false, usize::MAX);
    }
}

#[test]
fn rms_norm_vectors() {
    let mut rng = Rng::new(5);
    for dt in FLOATS {
        for (m, d) in [(1usize, 4usize), (512, 4096), (3, 37)] {
            let (x, xv) = rand_tensor(&mut rng, &[m as i64, d as i64], dt, 1.0, 0.0);
            let (w, wv) = rand_tensor(&mut rng, &[d as i64], dt, 1.0, 0.0);
            let y = HostTensor::new(&[m as i64, d as i64], dt);
            call(
                "ops.rms_norm",
                &[y.view(), x.view(), w.view(), AnyView::from(1e-5f64)],
            )
            .unwrap();
            let mut want = vec![0.0; m * d];
            for r in 0..m {
                let row = &xv[r * d..][..d];
                let ms = row.iter().map(|v| v * v).sum::<f64>() / d as f64;
                let inv = 1.0 / (ms + 1e-5).sqrt();
                for j in 0..d {
                    want[r * d + j] = wv[j] * row[j] * inv;
                }
            }
            let tol = dt.tol();
            assert_close(
                &format!("rms_norm {dt:?} ({m},{d})"),
                &y.get(),
                &want,
                tol,
                tol,
            );
        }
    }
}

/// Rows whose f32 sum of squares overflows (|x| ~ 1e19 .. 3e38) or underflows (|x| ~ 1e-30
/// with eps 0) still come out normalised, as in f64; rows that eps dominates and zero rows
/// stay as they were (zero rows with eps 0 give NaN, 0 * 1/sqrt(0), as the reference does).
/// Subnormal rows with eps 0 (1 / rms past f32) too, in the row-by-row kernel (d = 37) and
/// in the grouped one (d = 3000, 9 rows).
#[test]
fn rms_norm_rows_at_the_ends_of_f32() {
    let rows: [(f64, f64); 8] = [
        (1e19, 1e-5),
        (3e38, 1e-5),
        (1e-30, 0.0),
        (1e-41, 0.0),
        (3e-39, 0.0),
        (1e-25, 1e-5),
        (0.0, 1e-5),
        (0.0, 0.0),
    ];
    for (d, n) in [(37usize, 1usize), (3000, 9)] {
        for dt in [Dt::F32, Dt::BF16] {
            for (scale, eps) in rows {
                if dt == Dt::BF16 && scale < 1e-37 && scale > 0.0 {
                    continue; // below bf16's range
                }
                let vals: Vec<f64> = (0..n * d)
                    .map(|j| {
                        let j = j % d;
                        scale
                            * if j % 3 == 0 {
                                -1.0
                            } else {
                                0.5 + j as f64 / 74.0
                            }
                    })
                    .collect();
                let mut x = HostTensor::new(&[n as i64, d as i64], dt);
                x.set(&vals);
                let xv = x.get();
                let mut w = HostTensor::new(&[d as i64], dt);
                w.set(&vec![1.0; d]);
                let y = HostTensor::new(&[n as i64, d as i64], dt);
                call(
                    "ops.rms_norm",
                    &[y.view(), x.view(), w.view(), AnyView::from(eps)],
                )
                .unwrap();
                let ms = xv[..d].iter().map(|v| v * v).sum::<f64>() / d as f64;
                let want: Vec<f64> = xv.iter().map(|v| v / (ms + eps).sqrt()).collect();
                let got = y.get();
                for j in 0..n * d {
                    let ok = if want[j].is_nan() {
                        got[j].is_nan()
                    } else {
                        (got[j] - want[j]).abs() <= dt.tol() * (1.0 + want[j].abs())
                    };
                    assert!(
                        ok,
                        "{dt:?} d {d}: rows of {scale:e}, eps {eps}: y[{j}] = {}, want {}",
                        got[j], want[j]
                    );
                }
            }
        }
    }
}

/// The f32 recipe of spec §2.6: the angle rounded to f32, sin/cos in f64.
fn rope_ref(xv: &[f64], pos: &[f64], seq: usize, nh: usize, d: usize, theta: f64) -> Vec<f64> {
    let h = d / 2;
    let mut out = vec![0.0; xv.len()];
    for i in 0..seq {
        for j in 0..h {
            let den = (theta as f32).powf((2 * j) as f32 / d as f32);
            let phi = (pos[i] as f32 / den) as f64;
            let (s, c) = phi.sin_cos();
            for hd in 0..nh {
                let base = (i * nh + hd) * d;
                let (a, b) = (xv[base + j], xv[base + h + j]);
                out[base + j] = a * c - b * s;
                out[base + h + j] = b * c + a * s;
            }
        }
    }
    out
}

#[test]
fn rope_vectors() {
    let mut rng = Rng::new(6);
    for dt in FLOATS {
        for (shape, p0) in [([2i64, 1, 4], 0i64), ([512, 4, 4096], 512)] {
            let (seq, nh, d) = (shape[0] as usize, shape[1] as usize, shape[2] as usize);
            let (x, xv) = rand_tensor(&mut rng, &shape, dt, 1.0, 0.0);
            let mut pos = HostTensor::new(&[shape[0]], Dt::I64);
            let pv: Vec<f64> = (0..shape[0]).map(|i| (p0 + i) as f64).collect();
            pos.set(&pv);
            let y = HostTensor::new(&shape, dt);
            call(
                "ops.rope",
                &[y.view(), x.view(), pos.view(), AnyView::from(10000.0f64)],
            )
            .unwrap();
            let want = rope_ref(&xv, &pv, seq, nh, d, 1e4);
            let tol = if dt == Dt::F32 { 1e-4 } else { dt.tol() };
            assert_close(&format!("rope {dt:?} {shape:?}"), &y.get(), &want, tol, tol);
            // in place gives the same
            call(
                "ops.rope",
                &[x.view(), x.view(), pos.view(), AnyView::from(10000.0f64)],
            )
            .unwrap();
            assert_close("rope in place", &x.get(), &y.get(), 0.0, 0.0);
        }
    }
}

/// Positions whose angles the SIMD sine and cosine cannot reduce exactly (past ~1e6 radians:
/// long contexts, or theta below 1) give the f32 recipe's values, as small positions do.
#[test]
fn rope_far_positions() {
    let mut rng = Rng::new(9);
    let pv: Vec<f64> = [
        0i64,
        999_999,
        1_000_001,
        4_194_307,
        100_000_000,
        (1 << 31) - 1,
        -50_000_000,
        123_456_789_012,
    ]
    .iter()
    .map(|&p| p as f64)
    .collect();
    let (seq, nh, d) = (pv.len(), 2usize, 64usize);
    for dt in [Dt::F32, Dt::BF16] {
        for theta in [1e4f64, 0.5] {
            let shape = [seq as i64, nh as i64, d as i64];
            let (x, xv) = rand_tensor(&mut rng, &shape, dt, 1.0, 0.0);
            let mut pos = HostTensor::new(&[seq as i64], Dt::I64);
            pos.set(&pv);
            let y = HostTensor::new(&shape, dt);
            call(
                "ops.rope",
                &[y.view(), x.view(), pos.view(), AnyView::from(theta)],
            )
            .unwrap();
            let want = rope_ref(&xv, &pv, seq, nh, d, theta);
            let tol = if dt == Dt::F32 { 1e-4 } else { dt.tol() };
            assert_close(
                &format!("rope {dt:?} far positions, theta {theta}"),
                &y.get(),
                &want,
                tol,
                tol,
            );
        }
    }
}

/// f64 causal GQA attention.
#[allow(clippy::too_many_arguments)]
fn attn_ref(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    l: usize,
    s: usize,
    h: usize,
    hk: usize,
    d: usize,
    dv: usize,
    scale: f64,
) -> Vec<f64> {
    let mut out = vec![0.0; l * h * dv];
    let grp = h / hk;
    for i in 0..l {
        for hh in 0..h {
            let g = hh / grp;
            let lim = i + s - l;
            let sc: Vec<f64> = (0..=lim)
                .map(|j| {
                    (0..d)
                        .map(|t| q[(i * h + hh) * d + t] * k[(j * hk + g) * d + t])
                        .sum::<f64>()
                        * scale
                })
                .collect();
            let mx = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = sc.iter().map(|x| (x - mx).exp()).collect();
            let tot: f64 = e.iter().sum();
            for t in 0..dv {
                out[(i * h + hh) * dv + t] = (0..=lim)
                    .map(|j| e[j] * v[(j * hk + g) * dv + t])
                    .sum::<f64>()
                    / tot;
            }
        }
    }
    out
}

/// Runs ops.self_attention on `q`, `k`, `v` (`[l, h, d]`, `[s, hk, d]`, `[s, hk, d]`, stored
/// values `qv`, `kv`, `vv`) with scale 1/sqrt(d); returns (result, f64 reference).
#[allow(clippy::too_many_arguments)]
fn attention_and_ref(
    dt: Dt,
    (q, qv): (&HostTensor, &[f64]),
    (k, kv): (&HostTensor, &[f64]),
    (v, vv): (&HostTensor, &[f64]),
    l: usize,
    s: usize,
    h: usize,
    hk: usize,
    d: usize,
) -> (Vec<f64>, Vec<f64>) {
    let out = HostTensor::new(&[l as i64, h as i64, d as i64], dt);
    let scale = 1.0 / (d as f64).sqrt();
    call(
        "ops.self_attention",
        &[
            out.view(),
            q.view(),
            k.view(),
            v.view(),
            AnyView::from(scale),
        ],
    )
    .unwrap();
    (out.get(), attn_ref(qv, kv, vv, l, s, h, hk, d, d, scale))
}

fn check_attention(rng: &mut Rng, dt: Dt, l: usize, s: usize, h: usize, hk: usize, d: usize) {
    let (q, qv) = rand_tensor(rng, &[l as i64, h as i64, d as i64], dt, 1.0, 0.0);
    let (k, kv) = rand_tensor(rng, &[s as i64, hk as i64, d as i64], dt, 1.0, 0.0);
    let (v, vv) = rand_tensor(rng, &[s as i64, hk as i64, d as i64], dt, 1.0, 0.0);
    let (got, want) = attention_and_ref(dt, (&q, &qv), (&k, &kv), (&v, &vv), l, s, h, hk, d);
    let tol = dt.tol();
    assert_close(
        &format!("attention {dt:?} l={l} s={s} h={h} hk={hk} d={d}"),
        &got,
        &want,
        tol,
        tol,
    );
}

#[test]
fn self_attention_vectors() {
    let mut rng = Rng::new(7);
    for dt in FLOATS {
        check_attention(&mut rng, dt, 2, 2, 1, 1, 4);
        check_attention(&mut rng, dt, 5, 11, 4, 2, 8);
        // register-tile edges: head pairs plus one head, key counts off the 4-key tiles and the
        // 32-key value blocks, value widths with a partial tile
        check_attention(&mut rng, dt, 3, 37, 6, 2, 24);
        check_attention(&mut rng, dt, 2, 70, 5, 1, 40);
        // heads in threes and a one-head remainder (grp 4), rows longer than 128 (d 160 with
        // a partial vector, d 256)
        check_attention(&mut rng, dt, 2, 33, 8, 2, 160);
        check_attention(&mut rng, dt, 1, 70, 4, 1, 256);
    }
}

#[test]
fn self_attention_decode_and_prefill_with_cache() {
    let mut rng = Rng::new(8);
    for dt in FLOATS {
        // decode: 1 query against hundreds of cached keys, GQA 6:1, d = 128 (split-key path)
        check_attention(&mut rng, dt, 1, 300, 12, 2, 128);
        check_attention(&mut rng, dt, 1, 1500, 12, 2, 128);
        // prefill after a cache: offset S - L = 13, GQA 3:1
        check_attention(&mut rng, dt, 7, 20, 6, 2, 16);
        // many KV heads (K/V rows of 24 and 10 heads, 12 KiB and 5 KiB in f32), in decode and
        // prefill
        check_attention(&mut rng, dt, 1, 300, 48, 24, 128);
        check_attention(&mut rng, dt, 3, 40, 20, 10, 128);
    }
}

/// Attention inputs (tensor and its values) whose query is all ones and whose keys `neg` are
/// -inf in every element, so that they score -inf; the rest of K and V random.
#[allow(clippy::too_many_arguments)]
fn minus_inf_keys(
    rng: &mut Rng,
    dt: Dt,
    l: usize,
    s: usize,
    h: usize,
    hk: usize,
    d: usize,
    neg: std::ops::Range<usize>,
) -> [(HostTensor, Vec<f64>); 3] {
    let mut q = HostTensor::new(&[l as i64, h as i64, d as i64], dt);
    q.set(&vec![1.0; l * h * d]);
    let qv = q.get();
    let (mut k, mut kv) = rand_tensor(rng, &[s as i64, hk as i64, d as i64], dt, 1.0, 0.0);
    for x in &mut kv[neg.start * hk * d..neg.end * hk * d] {
        *x = f64::NEG_INFINITY;
    }
    k.set(&kv);
    let v = rand_tensor(rng, &[s as i64, hk as i64, d as i64], dt, 1.0, 0.0);
    [(q, qv), (k, kv), v]
}

#[test]
fn self_attention_minus_inf_scores_weigh_nothing() {
    // keys whose scores are -inf (q = 1, the key row -inf) weigh 0, as in softmax, also when
    // they fill whole key chunks or the first keys of a split before any finite score
    let mut rng = Rng::new(12);
    for dt in FLOATS {
        for (l, s, h, hk, d, neg) in [
            (1usize, 70usize, 6usize, 2usize, 32usize, 0..1usize),
            (1, 300, 12, 2, 128, 0..32),
            (1, 4096, 12, 2, 128, 0..600),
            (1, 4096, 12, 2, 128, 1000..3000),
            (3, 40, 6, 2, 16, 0..30),
        ] {
            let [(q, qv), (k, kv), (v, vv)] =
                minus_inf_keys(&mut rng, dt, l, s, h, hk, d, neg.clone());
            let (got, want) =
                attention_and_ref(dt, (&q, &qv), (&k, &kv), (&v, &vv), l, s, h, hk, d);
            assert!(want.iter().all(|x| x.is_finite()));
            assert_close(
                &format!("attention {dt:?} l={l} s={s} -inf keys {neg:?}"),
                &got,
                &want,
                dt.tol(),
                dt.tol(),
            );
        }
    }
}

#[test]
fn self_attention_rows_whose_keys_all_score_minus_inf_are_nan() {
    // softmax of a row of -inf is NaN (the spec's reference, torch.softmax): keys 0..neg score
    // -inf, so the causal rows that see only those keys are NaN and the later rows are not;
    // single-chunk prefill, decode split over chunks, every dtype (bf16: the vdpbf16ps path)
    let mut rng = Rng::new(13);
    for dt in FLOATS {
        for (l, s, h, hk, d, neg) in [
            (4usize, 4usize, 2usize, 1usize, 8usize, 1usize),
            (5, 11, 4, 2, 16, 8),
            (3, 300, 6, 2, 64, 299),
            (1, 4096, 12, 2, 128, 4096),
        ] {
            let [(q, _), (k, _), (v, _)] = minus_inf_keys(&mut rng, dt, l, s, h, hk, d, 0..neg);
            let mut out = HostTensor::new(&[l as i64, h as i64, d as i64], dt);
            out.set(&vec![0.0; l * h * d]);
            let scale = AnyView::from(1.0 / (d as f64).sqrt());
            call(
                "ops.self_attention",
                &[out.view(), q.view(), k.view(), v.view(), scale],
            )
            .unwrap();
            let got = out.get();
            for i in 0..l {
                let sees = i + (s - l) + 1; // keys 0..sees
                let row = &got[i * h * d..(i + 1) * h * d];
                if sees <= neg {
                    assert!(
                        row.iter().all(|x| x.is_nan()),
                        "{dt:?} l={l} s={s}: row {i} sees only -inf keys, got {:?}",
                        &row[..4]
                    );
                } else {
                    assert!(row.iter().all(|x| x.is_finite()), "{dt:?} row {i}");
                }
            }
        }
    }
}

#[test]
fn causal_mask_is_bottom_right() {
    // With v = one-hot key index and equal scores, row i averages keys 0..=i + (S - L).
    let (l, s, d) = (3usize, 5usize, 4usize);
    let q = HostTensor::new(&[l as i64, 1, d as i64], Dt::F32);
    let mut q = q;
    q.set(&vec![0.0; l * d]);
    let mut k = HostTensor::new(&[s as i64, 1, d as i64], Dt::F32);
    k.set(&vec![0.0; s * d]);
    let mut v = HostTensor::new(&[s as i64, 1, s as i64], Dt::F32);
    let mut vv = vec![0.0; s * s];
    for j in 0..s {
        vv[j * s + j] = 1.0;
    }
    v.set(&vv);
    let out = HostTensor::new(&[l as i64, 1, s as i64], Dt::F32);
    call(
        "ops.self_attention",
        &[out.view(), q.view(), k.view(), v.view(), AnyView::from(1.0)],
    )
    .unwrap();
    let got = out.get();
    for i in 0..l {
        let visible = i + s - l + 1;
        for j in 0..s {
            let want = if j < visible {
                1.0 / visible as f64
            } else {
                0.0
            };
            assert!(
                (got[i * s + j] - want).abs() < 1e-6,
                "row {i} key {j}: {} vs {want}",
                got[i * s + j]
            );
        }
    }
}

#[test]
fn swiglu_vectors() {
    let mut rng = Rng::new(9);
    for dt in FLOATS {
        for shape in [[2i64, 3], [512, 4096]] {
            let (g, gv) = rand_tensor(&mut rng, &shape, dt, 1.0, 0.0);
            let (u, uv) = rand_tensor(&mut rng, &shape, dt, 1.0, 0.0);
            let out = HostTensor::new(&shape, dt);
            call("ops.swiglu", &[out.view(), g.view(), u.view()]).unwrap();
            let want: Vec<f64> = gv
                .iter()
                .zip(&uv)
                .map(|(g, u)| u * g / (1.0 + (-g).exp()))
                .collect();
            let tol = dt.tol();
            assert_close(
                &format!("swiglu {dt:?} {shape:?}"),
                &out.get(),
                &want,
                tol,
                tol,
            );
        }
    }
    // large and negative gates (exp clamping)
    let mut g = HostTensor::new(&[1, 6], Dt::F32);
    g.set(&[-100.0, -20.0, -1.0, 0.0, 20.0, 100.0]);
    let mut u = HostTensor::new(&[1, 6], Dt::F32);
    u.set(&[1.0; 6]);
    let out = HostTensor::new(&[1, 6], Dt::F32);
    call("ops.swiglu", &[out.view(), g.view(), u.view()]).unwrap();
    let want: Vec<f64> = [-100.0f64, -20.0, -1.0, 0.0, 20.0, 100.0]
        .iter()
        .map(|g| g / (1.0 + (-g).exp()))
        .collect();
    assert_close("swiglu extremes", &out.get(), &want, 1e-6, 1e-6);
}

/// A head size of 0: every score is 0, so each query averages the V rows it sees (bf16 took a
/// dot-product kernel that read 512 bytes of each empty row).
#[test]
fn self_attention_with_head_size_zero() {
    setup();
    for (l, s, h, hk, dv, dt) in [Dt::F32, Dt::F16, Dt::BF16].into_iter().flat_map(|dt| {
        [
            (2usize, 3usize, 2usize, 1usize, 4usize, dt),
            (1, 40, 6, 2, 16, dt),
        ]
    }) {
        let q = HostTensor::new(&[l as i64, h as i64, 0], dt);
        let k = HostTensor::new(&[s as i64, hk as i64, 0], dt);
        let mut v = HostTensor::new(&[s as i64, hk as i64, dv as i64], dt);
        let vals: Vec<f64> = (0..s * hk * dv).map(|i| i as f64).collect();
        v.set(&vals);
        let vv = v.get(); // as rounded to dt
        let out = HostTensor::new(&[l as i64, h as i64, dv as i64], dt);
        call(
            "ops.self_attention",
            &[out.view(), q.view(), k.view(), v.view(), AnyView::from(1.0)],
        )
        .unwrap();
        let mut want = Vec::new();
        for i in 0..l {
            let seen = s - l + i + 1;
            for hh in 0..h {
                for t in 0..dv {
                    let g = hh / (h / hk);
                    want.push(
                        (0..seen).map(|j| vv[(j * hk + g) * dv + t]).sum::<f64>() / seen as f64,
                    );
                }
            }
        }
        assert_close(
            &format!("d = 0, {dt:?}"),
            &out.get(),
            &want,
            dt.tol(),
            dt.tol(),
        );
    }
}

#[test]
fn empty_and_size_one_layouts() {
    // an empty [2, 0, K] input (torch's strides (K, K, 1) do not collapse into rows) gives an
    // empty output, as torch.nn.functional.linear does
    for dt in FLOATS {
        let x = HostTensor::strided(&[2, 0, 3], &[3, 3, 1], dt);
        let w = HostTensor::new(&[4, 3], dt);
        let y = HostTensor::strided(&[2, 0, 4], &[4, 4, 1], dt);
        call("ops.linear", &[y.view(), x.view(), w.view(), AnyView::NONE]).unwrap();
    }
    // in place on the same elements whose size-1 dimension has another stride
    // (numpy's a[None, :] against a.reshape(1, n)): an exact alias, not a partial overlap
    let mut a = HostTensor::strided(&[1, 5], &[0, 1], Dt::F32);
    a.set(&[1.0, 2.0, 3.0, 4.0, 5.0]);
    let mut c = HostTensor::strided(&[1, 5], &[5, 1], Dt::F32);
    c.dl.data = a.dl.data;
    call("ops.add", &[c.view(), a.view(), a.view()]).unwrap();
    assert_eq!(a.get(), vec![2.0, 4.0, 6.0, 8.0, 10.0]);
    // attention with no heads at all (q [2, 0, 4], k and v [3, 0, 4]): an empty result, as
    // torch's; heads on one side only stay an error
    let q = HostTensor::new(&[2, 0, 4], Dt::F32);
    let kv = HostTensor::new(&[3, 0, 4], Dt::F32);
    let o = HostTensor::new(&[2, 0, 4], Dt::F32);
    call(
        "ops.self_attention",
        &[o.view(), q.view(), kv.view(), kv.view(), 0.5f64.into()],
    )
    .unwrap();
    let q = HostTensor::new(&[2, 2, 4], Dt::F32);
    let o = HostTensor::new(&[2, 2, 4], Dt::F32);
    let e = call(
        "ops.self_attention",
        &[o.view(), q.view(), kv.view(), kv.view(), 0.5f64.into()],
    )
    .unwrap_err();
    assert!(
        e.message()
            .contains("nhead (2) must be a multiple of nkvhead (0)"),
        "{}",
        e.message()
    );
}
