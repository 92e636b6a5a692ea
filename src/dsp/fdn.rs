//! The feedback-delay-network core of `reverb`, laid out for SIMD across the N delay lines.
//!
//! Every per-line quantity is a `[f32; N]` (structure of arrays): lane i belongs to delay
//! line i. All lines run the same filterbank coefficients and differ only in their band
//! gains, so one section update is N independent scalar updates in lock-step, which LLVM
//! turns into one or two vector instructions per operation (AVX-512: one zmm for N = 16).
//!
//! Time is processed in chunks no longer than the shortest delay line: within a chunk the
//! delay-line outputs are already known (they were written at least one chunk earlier), so
//! the recursive filters can run section by section over the whole chunk with their state
//! in registers, instead of reloading every state for every frame.
//!
//! Signal flow per frame, as in Faust's `re.fdnrev0` with `dm.fdnrev0_demo`'s routing:
//! `y = line outputs; u = input + mix(filter(y_prev)); line input = u`, where the lines
//! delay by `d_i − 1` and the feedback path adds one frame, so the loop time of line i is
//! `d_i`; even lines take the left input and feed the left output, odd lines the right.

// Lane loops index several arrays in lock-step on purpose: that is the shape LLVM vectorises.
#![allow(clippy::needless_range_loop)]

use super::filterbank::Biquad;

/// Frames per chunk (upper bound; also limited by the shortest line).
pub(crate) const CHUNK: usize = 64;

/// `a·b + c`, fused where the function is compiled with FMA, plain otherwise (an unfused
/// `mul_add` would be a libm call).
pub(crate) trait Madd {
    fn madd(a: f32, b: f32, c: f32) -> f32;
}

/// Used by the x86_64 AVX2/AVX-512 kernels only (reverb.rs), so compiled only there.
#[cfg(target_arch = "x86_64")]
pub(crate) struct Fused;
pub(crate) struct Plain;

#[cfg(target_arch = "x86_64")]
impl Madd for Fused {
    #[inline(always)]
    fn madd(a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }
}

impl Madd for Plain {
    #[inline(always)]
    fn madd(a: f32, b: f32, c: f32) -> f32 {
        a * b + c
    }
}

/// Transposed direct form II state of one section across the N lines.
#[derive(Clone, Copy)]
struct State<const N: usize> {
    s1: [f32; N],
    s2: [f32; N],
}

impl<const N: usize> Default for State<N> {
    fn default() -> Self {
        State {
            s1: [0.0; N],
            s2: [0.0; N],
        }
    }
}

#[inline(always)]
fn tick<M: Madd, const N: usize>(c: &Biquad, st: &mut State<N>, x: &mut [f32; N]) {
    for i in 0..N {
        let xi = x[i];
        let y = M::madd(c.b0, xi, st.s1[i]);
        st.s1[i] = M::madd(-c.a1, y, M::madd(c.b1, xi, st.s2[i]));
        st.s2[i] = M::madd(-c.a2, y, c.b2 * xi);
        x[i] = y;
    }
}

/// One sweep over the chunk: the next lowpass and highpass section of a crossover, and the
/// next section of the allpass applied to the band sum of the bands above it.
struct Pass<const N: usize> {
    lp: Biquad,
    hp: Biquad,
    ap: Option<Biquad>,
    lp_st: State<N>,
    hp_st: State<N>,
    ap_st: State<N>,
}

struct Stage<const N: usize> {
    passes: Vec<Pass<N>>,
    /// Gain of the band just above this crossover, per line (includes the 1/√N of the mix).
    gain: [f32; N],
}

pub(crate) struct Line {
    ring: Box<[f32]>,
    pos: usize,
}

/// What the constructor of `Fdn` needs, already validated.
pub(crate) struct FdnDesign {
    /// Loop delay of each line in frames (>= 2).
    pub delays: Vec<usize>,
    /// Crossovers in ascending frequency, each with its lowpass/highpass/allpass sections.
    pub crossovers: Vec<super::filterbank::Crossover>,
    /// Per band (ascending), per line, the loop gain including 1/√N.
    pub band_gains: Vec<Vec<f32>>,
    pub out_gain: f32,
}

pub(crate) struct Fdn<const N: usize> {
    lines: Vec<Line>,
    /// Highest crossover first: the order the band split runs in.
    stages: Vec<Stage<N>>,
    low_gain: [f32; N],
    even: [f32; N],
    odd: [f32; N],
    out_gain: f32,
    carry: [f32; N],
    chunk: usize,
    y: Vec<[f32; N]>,
    lo: Vec<[f32; N]>,
    hi: Vec<[f32; N]>,
    acc: Vec<[f32; N]>,
    out_l: Vec<f32>,
    out_r: Vec<f32>,
}

fn lanes<const N: usize>(v: &[f32]) -> [f32; N] {
    let mut a = [0.0; N];
    a.copy_from_slice(v);
    a
}

impl<const N: usize> Fdn<N> {
    pub(crate) fn new(d: &FdnDesign) -> Fdn<N> {
        assert_eq!(d.delays.len(), N);
        let lines: Vec<Line> = d
            .delays
            .iter()
            .map(|&len| Line {
                ring: vec![0.0; len - 1].into_boxed_slice(),
                pos: 0,
            })
            .collect();
        let shortest = lines.iter().map(|l| l.ring.len()).min().unwrap_or(1);
        let chunk = CHUNK.min(shortest).max(1);
        let ncross = d.crossovers.len();
        let stages = d
            .crossovers
            .iter()
            .enumerate()
            .rev()
            .map(|(k, x)| {
                // The top crossover's allpass would act on a zero band sum: skip it.
                let top = k + 1 == ncross;
                let passes = (0..x.lowpass.len())
                    .map(|p| Pass {
                        lp: x.lowpass[p],
                        hp: x.highpass[p],
                        ap: if top { None } else { x.allpass.get(p).copied() },
                        lp_st: State::default(),
                        hp_st: State::default(),
                        ap_st: State::default(),
                    })
                    .collect();
                Stage {
                    passes,
                    gain: lanes(&d.band_gains[k + 1]),
                }
            })
            .collect();
        Fdn {
            lines,
            stages,
            low_gain: lanes(&d.band_gains[0]),
            even: std::array::from_fn(|i| if i % 2 == 0 { 1.0 } else { 0.0 }),
            odd: std::array::from_fn(|i| if i % 2 == 1 { 1.0 } else { 0.0 }),
            out_gain: d.out_gain,
            carry: [0.0; N],
            chunk,
            y: vec![[0.0; N]; chunk],
            lo: vec![[0.0; N]; chunk],
            hi: vec![[0.0; N]; chunk],
            acc: vec![[0.0; N]; chunk],
            out_l: vec![0.0; chunk],
            out_r: vec![0.0; chunk],
        }
    }

    /// Process a block in place. Allocation-free; `M` picks fused or plain multiply-add.
    #[inline(always)]
    pub(crate) fn process<M: Madd>(&mut self, left: &mut [f32], right: &mut [f32]) {
        let frames = left.len().min(right.len());
        let mut done = 0;
        while done < frames {
            let room = self.lines.iter().map(|l| l.ring.len() - l.pos).min();
            let n = self.chunk.min(frames - done).min(room.unwrap_or(1));
            self.run_chunk::<M>(&mut left[done..done + n], &mut right[done..done + n], n);
            done += n;
        }
    }

    #[inline(always)]
    fn run_chunk<M: Madd>(&mut self, left: &mut [f32], right: &mut [f32], n: usize) {
        let y = &mut self.y[..n];
        let lo = &mut self.lo[..n];
        let hi = &mut self.hi[..n];
        let acc = &mut self.acc[..n];

        // Delay-line outputs for the chunk, transposed into lanes; the chunk never crosses
        // a ring's wrap (see `process`), so line i's outputs are ring_i[pos_i .. pos_i + n].
        // Frame-major with scalar moves on purpose: line-major strided loops get compiled
        // to vector gathers/scatters, which cost several times more on current x86 cores.
        let ring = |i: usize| &self.lines[i].ring[self.lines[i].pos..self.lines[i].pos + n];
        let reads: [&[f32]; N] = std::array::from_fn(ring);
        let (out_l, out_r) = (&mut self.out_l[..n], &mut self.out_r[..n]);
        for t in 0..n {
            let mut row = [0.0f32; N];
            let (mut l, mut r) = (0.0f32, 0.0f32);
            for i in 0..N {
                let v = reads[i][t];
                row[i] = v;
                if i % 2 == 0 {
                    l += v;
                } else {
                    r += v;
                }
            }
            y[t] = row;
            out_l[t] = l;
            out_r[t] = r;
        }

        // Band split, highest crossover first. `lo` carries what is below the crossovers
        // processed so far; `acc` the gain-weighted, phase-aligned sum of the bands above.
        lo.copy_from_slice(y);
        for a in acc.iter_mut() {
            *a = [0.0; N];
        }
        for stage in self.stages.iter_mut() {
            hi.copy_from_slice(lo);
            let last = stage.passes.len() - 1;
            for (p, pass) in stage.passes.iter_mut().enumerate() {
                match (p == last, pass.ap) {
                    (false, None) => sweep::<M, N, false, false>(pass, lo, hi, acc, &stage.gain),
                    (false, Some(_)) => sweep::<M, N, false, true>(pass, lo, hi, acc, &stage.gain),
                    (true, None) => sweep::<M, N, true, false>(pass, lo, hi, acc, &stage.gain),
                    (true, Some(_)) => sweep::<M, N, true, true>(pass, lo, hi, acc, &stage.gain),
                }
            }
        }

        // Lowest band, Hadamard mix, input injection, outputs.
        let (g0, even, odd, og) = (self.low_gain, self.even, self.odd, self.out_gain);
        let (out_l, out_r) = (&self.out_l[..n], &self.out_r[..n]);
        let mut carry = self.carry;
        for t in 0..n {
            let mut f = acc[t];
            for i in 0..N {
                f[i] = M::madd(g0[i], lo[t][i], f[i]);
            }
            hadamard(&mut f);
            let (xl, xr) = (left[t], right[t]);
            let mut u = carry;
            for i in 0..N {
                u[i] = M::madd(even[i], xl, M::madd(odd[i], xr, u[i]));
            }
            acc[t] = u;
            carry = f;
            left[t] = out_l[t] * og;
            right[t] = out_r[t] * og;
        }
        self.carry = carry;

        // New line inputs replace the outputs just read (ring length = delay - 1).
        let writes: [&mut [f32]; N] = {
            let mut it = self.lines.iter_mut().map(|l| &mut l.ring[l.pos..l.pos + n]);
            std::array::from_fn(|_| it.next().expect("N lines"))
        };
        for t in 0..n {
            let row = acc[t];
            for i in 0..N {
                writes[i][t] = row[i];
            }
        }
        for line in self.lines.iter_mut() {
            line.pos = (line.pos + n) % line.ring.len();
        }
    }
}

/// One pass of a stage over the chunk. With `LAST`, the highpass output is weighted and
/// added to the band sum instead of being stored; with `AP`, the band sum first goes
/// through this pass's allpass section.
#[inline(always)]
fn sweep<M: Madd, const N: usize, const LAST: bool, const AP: bool>(
    pass: &mut Pass<N>,
    lo: &mut [[f32; N]],
    hi: &mut [[f32; N]],
    acc: &mut [[f32; N]],
    gain: &[f32; N],
) {
    let (lp, hp) = (pass.lp, pass.hp);
    let ap = pass.ap.unwrap_or(Biquad::IDENTITY);
    let (mut ls, mut hs, mut as_) = (pass.lp_st, pass.hp_st, pass.ap_st);
    for ((l, h), a) in lo.iter_mut().zip(hi.iter_mut()).zip(acc.iter_mut()) {
        tick::<M, N>(&lp, &mut ls, l);
        let mut hv = *h;
        tick::<M, N>(&hp, &mut hs, &mut hv);
        if AP {
            tick::<M, N>(&ap, &mut as_, a);
        }
        if LAST {
            for i in 0..N {
                a[i] = M::madd(gain[i], hv[i], a[i]);
            }
        } else {
            *h = hv;
        }
    }
    pass.lp_st = ls;
    pass.hp_st = hs;
    pass.ap_st = as_;
}

/// Unnormalised fast Walsh–Hadamard transform (the 1/√N is folded into the band gains).
#[inline(always)]
fn hadamard<const N: usize>(v: &mut [f32; N]) {
    let mut h = 1;
    while h < N {
        let mut i = 0;
        while i < N {
            for j in i..i + h {
                let (a, b) = (v[j], v[j + h]);
                v[j] = a + b;
                v[j + h] = a - b;
            }
            i += 2 * h;
        }
        h *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hadamard_is_orthogonal_up_to_n() {
        let mut v = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        let e0: f32 = v.iter().map(|x| x * x).sum();
        hadamard(&mut v);
        let e1: f32 = v.iter().map(|x| x * x).sum();
        assert!((e1 / e0 - 8.0).abs() < 1e-5);
        hadamard(&mut v);
        // H·H = N·I
        assert_eq!(v, [8.0, 16.0, 24.0, 32.0, 40.0, 48.0, 56.0, 64.0]);
    }
}
