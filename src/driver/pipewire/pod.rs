//! The profiler's SPA POD, read from its bytes (`spa/param/profiler.h`, spa/pod/pod.h):
//! a Struct of Objects, one per driver cycle, each with `info`, `clock`, `driverBlock` and
//! one `followerBlock` per node, every property a Struct of plain values. Read by position
//! and length, never trusting a size: a malformed or future POD gives fewer fields, not a
//! read out of bounds. Fields a newer PipeWire appends (per-node xrun counts, `async`) are
//! read when present.

/// SPA type ids (spa/utils/type.h).
const T_BOOL: u32 = 2;
const T_INT: u32 = 4;
const T_LONG: u32 = 5;
const T_FLOAT: u32 = 6;
const T_DOUBLE: u32 = 7;
const T_STRING: u32 = 8;
const T_FRACTION: u32 = 11;
const T_STRUCT: u32 = 14;
const T_OBJECT: u32 = 15;

/// Profiler property keys (spa/param/profiler.h).
const P_INFO: u32 = 0x10001;
const P_CLOCK: u32 = 0x10002;
const P_DRIVER_BLOCK: u32 = 0x10003;
const P_FOLLOWER_BLOCK: u32 = 0x20001;

/// A node's activation status (pipewire/private.h `PW_NODE_ACTIVATION_*`).
pub const NOT_TRIGGERED: i32 = 0;
pub const TRIGGERED: i32 = 1;
pub const AWAKE: i32 = 2;
pub const FINISHED: i32 = 3;

/// One value of a Struct.
#[derive(Debug, Clone, PartialEq)]
enum Value<'a> {
    Int(i64),
    Float(f64),
    Str(&'a [u8]),
    Fraction(u32, u32),
    Other,
}

/// One node's times in a cycle (CLOCK_MONOTONIC ns) and its status when it was sampled.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Block {
    pub id: u32,
    pub name: String,
    pub prev_signal: u64,
    pub signal: u64,
    pub awake: u64,
    pub finish: u64,
    pub status: i32,
    /// Per-node xrun counter (PipeWire ≥ 0.3.72), None before.
    pub xrun_count: Option<u64>,
    /// Runs asynchronously (its times are the previous cycle's; PipeWire ≥ 1.2).
    pub is_async: bool,
}

/// One driver cycle as the profiler sampled it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// The driver's cycle counter.
    pub counter: u64,
    /// The driver's DSP load EMA (fast), 0–1.
    pub cpu_load: f64,
    /// The driver's xrun counter.
    pub xrun_count: u64,
    /// Cycle start (CLOCK_MONOTONIC ns).
    pub nsec: u64,
    pub rate_num: u32,
    pub rate_denom: u32,
    pub position: u64,
    /// The quantum, frames.
    pub duration: u64,
    pub delay: i64,
    /// When the next cycle is due (ns); 0 when the driver does not say.
    pub next_nsec: u64,
    pub driver: Block,
    pub followers: Vec<Block>,
}

impl Sample {
    /// The cycle's length, ns (the quantum at the clock's rate).
    pub fn period_ns(&self) -> u64 {
        if self.rate_denom == 0 {
            return 0;
        }
        (self.duration as u128 * self.rate_num.max(1) as u128 * 1_000_000_000
            / self.rate_denom as u128) as u64
    }

    /// Frames per second of the driver's clock.
    pub fn rate(&self) -> u32 {
        self.rate_denom / self.rate_num.max(1)
    }
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The POD at `at`: (type, body); the next POD starts 8-aligned after the body.
fn pod(b: &[u8], at: usize) -> Option<(u32, &[u8], usize)> {
    let size = u32_at(b, at)? as usize;
    let ty = u32_at(b, at + 4)?;
    let body = b.get(at + 8..(at + 8).checked_add(size)?)?;
    let next = (at + 8 + size).div_ceil(8) * 8;
    Some((ty, body, next))
}

fn value(ty: u32, body: &[u8]) -> Value<'_> {
    let i32v = || u32_at(body, 0).map(|v| v as i32 as i64);
    match ty {
        T_BOOL | T_INT => i32v().map_or(Value::Other, Value::Int),
        T_LONG => body
            .get(..8)
            .and_then(|s| s.try_into().ok())
            .map_or(Value::Other, |s| Value::Int(i64::from_ne_bytes(s))),
        T_FLOAT => u32_at(body, 0).map_or(Value::Other, |v| Value::Float(f32::from_bits(v) as f64)),
        T_DOUBLE => body
            .get(..8)
            .and_then(|s| s.try_into().ok())
            .map_or(Value::Other, |s| Value::Float(f64::from_ne_bytes(s))),
        T_STRING => {
            let end = body.iter().position(|&c| c == 0).unwrap_or(body.len());
            Value::Str(&body[..end])
        }
        T_FRACTION => match (u32_at(body, 0), u32_at(body, 4)) {
            (Some(n), Some(d)) => Value::Fraction(n, d),
            _ => Value::Other,
        },
        _ => Value::Other,
    }
}

/// The values of a Struct body, in order.
fn fields(body: &[u8]) -> Vec<Value<'_>> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some((ty, b, next)) = pod(body, at) {
        out.push(value(ty, b));
        at = next;
    }
    out
}

fn int(v: &[Value], i: usize) -> i64 {
    match v.get(i) {
        Some(Value::Int(x)) => *x,
        Some(Value::Float(x)) => *x as i64,
        _ => 0,
    }
}

fn float(v: &[Value], i: usize) -> f64 {
    match v.get(i) {
        Some(Value::Float(x)) => *x,
        Some(Value::Int(x)) => *x as f64,
        _ => 0.0,
    }
}

fn text(v: &[Value], i: usize) -> String {
    match v.get(i) {
        Some(Value::Str(s)) => String::from_utf8_lossy(s).into_owned(),
        _ => String::new(),
    }
}

fn block(v: &[Value]) -> Block {
    Block {
        id: int(v, 0) as u32,
        name: text(v, 1),
        prev_signal: int(v, 2).max(0) as u64,
        signal: int(v, 3).max(0) as u64,
        awake: int(v, 4).max(0) as u64,
        finish: int(v, 5).max(0) as u64,
        status: int(v, 6) as i32,
        xrun_count: matches!(v.get(8), Some(Value::Int(_))).then(|| int(v, 8).max(0) as u64),
        is_async: int(v, 9) != 0,
    }
}

/// One Object (a cycle), from its body.
fn sample(body: &[u8]) -> Sample {
    let mut s = Sample::default();
    // Object body: type, id, then properties (key, flags, value POD).
    let mut at = 8;
    while let (Some(key), Some((ty, b, next))) = (u32_at(body, at), pod(body, at + 8)) {
        at = next;
        if ty != T_STRUCT {
            continue;
        }
        let v = fields(b);
        match key {
            P_INFO => {
                s.counter = int(&v, 0).max(0) as u64;
                s.cpu_load = float(&v, 1);
                s.xrun_count = int(&v, 4).max(0) as u64;
            }
            P_CLOCK => {
                s.nsec = int(&v, 3).max(0) as u64;
                if let Some(Value::Fraction(n, d)) = v.get(4) {
                    (s.rate_num, s.rate_denom) = (*n, *d);
                }
                s.position = int(&v, 5).max(0) as u64;
                s.duration = int(&v, 6).max(0) as u64;
                s.delay = int(&v, 7);
                s.next_nsec = int(&v, 9).max(0) as u64;
            }
            P_DRIVER_BLOCK => s.driver = block(&v),
            P_FOLLOWER_BLOCK => s.followers.push(block(&v)),
            _ => {}
        }
    }
    s
}

/// The cycles in one profiler event: a Struct of Objects (or a lone Object).
pub fn samples(b: &[u8]) -> Vec<Sample> {
    let Some((ty, body, _)) = pod(b, 0) else {
        return Vec::new();
    };
    match ty {
        T_OBJECT => vec![sample(body)],
        T_STRUCT => {
            let mut out = Vec::new();
            let mut at = 0;
            while let Some((ty, o, next)) = pod(body, at) {
                if ty == T_OBJECT {
                    out.push(sample(o));
                }
                at = next;
            }
            out
        }
        _ => Vec::new(),
    }
}

/// Builds PODs as the profiler does, for tests of the parser and the cycle tracker.
#[cfg(test)]
pub mod build {
    use super::*;

    pub struct Pod(pub Vec<u8>);

    fn push(out: &mut Vec<u8>, ty: u32, body: &[u8]) {
        out.extend((body.len() as u32).to_ne_bytes());
        out.extend(ty.to_ne_bytes());
        out.extend(body);
        while !out.len().is_multiple_of(8) {
            out.push(0);
        }
    }

    pub enum F<'a> {
        I(i32),
        L(i64),
        S(&'a str),
        Fr(u32, u32),
        D(f64),
        Fl(f32),
    }

    pub fn strukt(fs: &[F]) -> Vec<u8> {
        let mut b = Vec::new();
        for f in fs {
            match f {
                F::I(v) => push(&mut b, T_INT, &v.to_ne_bytes()),
                F::L(v) => push(&mut b, T_LONG, &v.to_ne_bytes()),
                F::S(s) => {
                    let mut z = s.as_bytes().to_vec();
                    z.push(0);
                    push(&mut b, T_STRING, &z)
                }
                F::Fr(n, d) => {
                    let mut z = n.to_ne_bytes().to_vec();
                    z.extend(d.to_ne_bytes());
                    push(&mut b, T_FRACTION, &z)
                }
                F::D(v) => push(&mut b, T_DOUBLE, &v.to_ne_bytes()),
                F::Fl(v) => push(&mut b, T_FLOAT, &v.to_bits().to_ne_bytes()),
            }
        }
        b
    }

    /// One cycle's Object from its property structs.
    pub fn object(props: &[(u32, Vec<u8>)]) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend(0x4_0009u32.to_ne_bytes());
        body.extend(0u32.to_ne_bytes());
        for (k, s) in props {
            body.extend(k.to_ne_bytes());
            body.extend(0u32.to_ne_bytes());
            push(&mut body, T_STRUCT, s);
        }
        let mut out = Vec::new();
        push(&mut out, T_OBJECT, &body);
        out
    }

    /// A Struct of objects, as the profiler flushes them.
    pub fn event(objects: &[Vec<u8>]) -> Vec<u8> {
        let body: Vec<u8> = objects.concat();
        let mut out = Vec::new();
        push(&mut out, T_STRUCT, &body);
        out
    }

    /// A node's block: (id, name, signal, awake, finish, status).
    pub fn node(id: i32, name: &str, t: (i64, i64, i64), status: i32) -> Vec<u8> {
        strukt(&[
            F::I(id),
            F::S(name),
            F::L(t.0 - 5_333_333),
            F::L(t.0),
            F::L(t.1),
            F::L(t.2),
            F::I(status),
            F::Fr(256, 48000),
        ])
    }

    /// A cycle starting at `start` (256/48000) with the driver's xrun count and followers.
    pub fn cycle(n: i64, start: i64, xruns: i32, followers: &[Vec<u8>]) -> Vec<u8> {
        let mut props = vec![
            (
                P_INFO,
                strukt(&[F::L(n), F::Fl(0.25), F::Fl(0.2), F::Fl(0.1), F::I(xruns)]),
            ),
            (
                P_CLOCK,
                strukt(&[
                    F::I(0),
                    F::I(0),
                    F::S("clock.system.monotonic"),
                    F::L(start),
                    F::Fr(1, 48000),
                    F::L(n * 256),
                    F::L(256),
                    F::L(0),
                    F::D(1.0),
                    F::L(start + 5_333_333),
                ]),
            ),
            (
                P_DRIVER_BLOCK,
                node(
                    30,
                    "Dummy-Driver",
                    (start, start + 1000, start + 400_000),
                    3,
                ),
            ),
        ];
        for f in followers {
            props.push((P_FOLLOWER_BLOCK, f.clone()));
        }
        object(&props)
    }
}

#[cfg(test)]
mod tests {
    use super::build::*;
    use super::*;

    #[test]
    fn a_cycle_reads_back_as_written() {
        let a = node(
            41,
            "xrl-slowpoke",
            (1_000_000, 1_050_000, 1_300_000),
            FINISHED,
        );
        let b = node(42, "other", (1_000_000, 1_020_000, 1_100_000), AWAKE);
        let ev = event(&[cycle(7, 1_000_000, 2, &[a, b]), cycle(8, 6_333_333, 2, &[])]);
        let s = samples(&ev);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].counter, 7);
        assert_eq!(s[0].xrun_count, 2);
        assert!((s[0].cpu_load - 0.25).abs() < 1e-6);
        assert_eq!((s[0].rate(), s[0].duration), (48000, 256));
        assert_eq!(s[0].period_ns(), 5_333_333);
        assert_eq!(s[0].next_nsec, 6_333_333);
        assert_eq!(s[0].driver.name, "Dummy-Driver");
        assert_eq!(s[0].followers.len(), 2);
        let f = &s[0].followers[0];
        assert_eq!((f.id, f.name.as_str()), (41, "xrl-slowpoke"));
        assert_eq!(
            (f.signal, f.awake, f.finish),
            (1_000_000, 1_050_000, 1_300_000)
        );
        assert_eq!(f.status, FINISHED);
        assert_eq!(f.xrun_count, None);
        assert_eq!(s[0].followers[1].status, AWAKE);
        assert_eq!(s[1].counter, 8);
    }

    #[test]
    fn truncated_or_garbage_bytes_give_fewer_fields_never_a_panic() {
        let ev = event(&[cycle(1, 10, 0, &[node(1, "n", (10, 20, 30), FINISHED)])]);
        for cut in 0..ev.len() {
            let _ = samples(&ev[..cut]);
        }
        let mut bad = ev.clone();
        bad[0..4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert!(samples(&bad).is_empty());
        assert!(samples(&[0xff; 64]).is_empty());
    }
}
