// SPDX-License-Identifier: GPL-2.0-only
//! `--factor F` needs the local and remote latency of a request, as a reader sees
//! them, before any penalty is active: measured here with the load fio's 4k random
//! direct reads put on the disk (one thread, pread, O_DIRECT), pinned first to the
//! CPUs of the disk's node and then to those of the nearest other node, as
//! `fio --cpus_allowed` pins a job.
//!
//! ```text
//!   for round in 1..=ROUNDS:  local slice (pinned) ─► remote slice (pinned)
//!   local  = median over the local slices' mean latency
//!   remote = local x median over the rounds' remote / local
//! ```
//! Alternating short slices rather than two long runs: the machines are shared and
//! noisy (an emulator on 2 host cores above all), and drift then hits both sides alike.
//! Medians rather than means over all reads: a host that stalls the emulator for a
//! few hundred milliseconds spoils one slice, and a mean let that slice decide. Seen in
//! the VM with means, lab off: remote / local from 0.57 to 1.77 in one boot, where fio
//! pinned the same way read 0.99 to 1.12.

use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

const BLOCK: usize = 4096;
/// Reads go to the first GiB at most: far larger than any cache between us and
/// the device is irrelevant (O_DIRECT), and small sparse test images stay cheap.
const SPAN: u64 = 1 << 30;
const ROUNDS: u32 = 16;

/// Mean latency of one 4k direct read, in ns.
#[derive(Debug, Clone, Copy)]
pub struct Latencies {
    pub local_ns: f64,
    pub remote_ns: f64,
    pub reads: u64,
}

/// A 4096-aligned buffer for O_DIRECT without an allocator crate.
struct Aligned(Box<[u8]>, usize);

impl Aligned {
    fn new() -> Self {
        let raw = vec![0u8; BLOCK * 2].into_boxed_slice();
        let off = raw.as_ptr().align_offset(BLOCK);
        Aligned(raw, off)
    }
    fn buf(&mut self) -> &mut [u8] {
        let off = self.1;
        &mut self.0[off..off + BLOCK]
    }
}

fn pin_to(cpus: &[u32]) -> Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET does no bounds
    // check, so every id is checked against the set's size first.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus {
            if cpu as usize >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
                bail!("CPU {cpu} is beyond what sched_setaffinity takes here");
            }
            libc::CPU_SET(cpu as usize, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            bail!(
                "cannot pin the calibration thread to CPUs {cpus:?}: {} (is this process's \
                 affinity restricted? run it with every CPU allowed, or use --us)",
                std::io::Error::last_os_error()
            );
        }
    }
    Ok(())
}

/// xorshift64: random offsets without a dependency; quality does not matter here.
fn next_offset(state: &mut u64, blocks: u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    (*state % blocks) * BLOCK as u64
}

/// Reads between two clock reads: a slice is timed as a whole and divided by its
/// reads, not read by read. In the VM a clock read is a syscall and an emulated
/// HPET access (hundreds of microseconds under TCG); two per read inflated the
/// local latency by 70 % and so compressed every measured ratio.
const READS_PER_CLOCK: u64 = 16;

/// Reads for about `slice` pinned to `cpus`; returns (reads, total ns, the CPU it
/// ended on).
fn read_slice(
    file: &File,
    cpus: &[u32],
    slice: Duration,
    blocks: u64,
    seed: &mut u64,
) -> Result<(u64, u128, i32)> {
    pin_to(cpus)?;
    let mut buf = Aligned::new();
    let mut n = 0u64;
    let start = Instant::now();
    let end = start + slice;
    loop {
        for _ in 0..READS_PER_CLOCK {
            let off = next_offset(seed, blocks);
            file.read_exact_at(buf.buf(), off)
                .with_context(|| format!("calibration read at offset {off}"))?;
            n += 1;
        }
        if Instant::now() >= end {
            break;
        }
    }
    let elapsed = start.elapsed().as_nanos();
    // SAFETY: sched_getcpu takes nothing and only reads.
    Ok((n, elapsed, unsafe { libc::sched_getcpu() }))
}

/// Measures `/dev/<disk>` from `local_cpus` and `remote_cpus`, `total` split evenly.
/// Runs on a thread of its own, so the caller's affinity is left as it was.
/// `verbose`: every round's two latencies, and the CPUs they ended on, on stderr.
pub fn measure(
    disk: &str,
    local_cpus: &[u32],
    remote_cpus: &[u32],
    total: Duration,
    verbose: bool,
) -> Result<Latencies> {
    let path = format!("/dev/{disk}");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .with_context(|| format!("opening {path} for calibration reads (O_DIRECT, read-only)"))?;
    let sectors: u64 = std::fs::read_to_string(format!("/sys/block/{disk}/size"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    let blocks = (sectors * 512).min(SPAN) / BLOCK as u64;
    if blocks == 0 {
        bail!("{path} is empty (size 0): cannot measure its latency; use --us instead");
    }
    let slice = total / (2 * ROUNDS);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut seed = 0x9e37_79b9_7f4a_7c15u64;
            let mut reads = 0u64;
            let mut rounds = Vec::with_capacity(ROUNDS as usize);
            for round in 0..ROUNDS {
                // ABBA: which side goes first alternates, so a linear drift cancels.
                let (mut local, mut remote) = ((0.0, -1), (0.0, -1));
                for is_remote in [round % 2 == 1, round % 2 == 0] {
                    let cpus = if is_remote { remote_cpus } else { local_cpus };
                    let (n, t, cpu) = read_slice(&file, cpus, slice, blocks, &mut seed)?;
                    reads += n;
                    let mean = t as f64 / n.max(1) as f64;
                    if is_remote {
                        remote = (mean, cpu);
                    } else {
                        local = (mean, cpu);
                    }
                }
                if verbose {
                    eprintln!(
                        "calibration {disk} round {round}: local {:.0} us (CPU {}), remote {:.0} us (CPU {})",
                        local.0 / 1e3,
                        local.1,
                        remote.0 / 1e3,
                        remote.1
                    );
                }
                rounds.push((local.0, remote.0));
            }
            summarize(&rounds, reads)
                .with_context(|| format!("no calibration read finished on {path} in {total:?}"))
        })
        .join()
        .map_err(|_| anyhow::anyhow!("the calibration thread panicked"))?
    })
}

/// The median of `values` (the mean of the middle two for an even count).
fn median(mut values: Vec<f64>) -> Option<f64> {
    values.retain(|v| v.is_finite());
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// Each round's (local, remote) mean latency to the medians the module doc gives.
fn summarize(rounds: &[(f64, f64)], reads: u64) -> Option<Latencies> {
    let timed: Vec<(f64, f64)> = rounds
        .iter()
        .copied()
        .filter(|&(l, r)| l > 0.0 && r > 0.0)
        .collect();
    let local_ns = median(timed.iter().map(|&(l, _)| l).collect())?;
    let ratio = median(timed.iter().map(|&(l, r)| r / l).collect())?;
    Some(Latencies {
        local_ns,
        remote_ns: local_ns * ratio,
        reads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_stalled_slice_does_not_decide() {
        // Seven rounds at 500 us both sides; one remote slice stalled to 5 ms.
        let mut rounds = vec![(500_000.0, 500_000.0); 7];
        rounds[3].1 = 5_000_000.0;
        let lat = summarize(&rounds, 100).unwrap();
        assert_eq!(lat.local_ns, 500_000.0);
        assert_eq!(lat.remote_ns, 500_000.0);
        // Drift that slows both sides of a round alike leaves the ratio alone.
        let drifting: Vec<(f64, f64)> = (1..=6)
            .map(|i| (i as f64 * 100_000.0, i as f64 * 200_000.0))
            .collect();
        let lat = summarize(&drifting, 100).unwrap();
        assert_eq!(lat.remote_ns / lat.local_ns, 2.0);
    }

    #[test]
    fn no_timed_round_is_none() {
        assert!(summarize(&[], 0).is_none());
        assert!(summarize(&[(0.0, 1.0), (f64::NAN, 1.0)], 0).is_none());
        assert_eq!(median(vec![3.0, 1.0, 2.0, 10.0]), Some(2.5));
    }

    #[test]
    fn offsets_are_aligned_and_in_range() {
        let mut seed = 42;
        for _ in 0..1000 {
            let off = next_offset(&mut seed, 10);
            assert_eq!(off % BLOCK as u64, 0);
            assert!(off < 10 * BLOCK as u64);
        }
    }

    #[test]
    fn buffer_is_aligned() {
        let mut a = Aligned::new();
        assert_eq!(a.buf().as_ptr() as usize % BLOCK, 0);
        assert_eq!(a.buf().len(), BLOCK);
    }
}
