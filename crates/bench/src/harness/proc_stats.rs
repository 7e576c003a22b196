//! What a process costs, from /proc: resident memory (`VmRSS` in /proc/<pid>/status) and CPU
//! time (utime + stime in /proc/<pid>/stat); and the whole machine's busy time (/proc/stat),
//! so a run can say how much CPU other tenants of the box took meanwhile. Linux only, like
//! the servers the bench starts.

use std::time::{Duration, Instant};

/// /proc reports CPU time in clock ticks of USER_HZ, which is 100 on every Linux ABI.
const TICKS_PER_S: f64 = 100.0;

/// Resident set size of `pid`, in bytes.
pub fn rss_bytes(pid: u32) -> std::io::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    parse_vm_rss(&status).ok_or_else(|| std::io::Error::other("no VmRSS line"))
}

/// CPU time `pid` has used so far (user + system, all threads).
pub fn cpu_time(pid: u32) -> std::io::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse_cpu_ticks(&stat)
        .map(|t| Duration::from_secs_f64(t as f64 / TICKS_PER_S))
        .ok_or_else(|| std::io::Error::other("unreadable /proc/<pid>/stat"))
}

/// CPU use of a process between two points: cores busy on average.
#[derive(Debug, Clone, Copy)]
pub struct CpuMeter {
    pid: u32,
    cpu: Duration,
    at: Instant,
}

impl CpuMeter {
    pub fn start(pid: u32) -> std::io::Result<CpuMeter> {
        Ok(CpuMeter {
            pid,
            cpu: cpu_time(pid)?,
            at: Instant::now(),
        })
    }

    /// Average cores used since `start` (1.0 = one core busy all the time).
    pub fn cores(&self) -> std::io::Result<f64> {
        let used = cpu_time(self.pid)?.saturating_sub(self.cpu);
        let wall = self.at.elapsed().as_secs_f64();
        Ok(if wall > 0.0 {
            used.as_secs_f64() / wall
        } else {
            0.0
        })
    }
}

/// Busy time of all CPUs together (everything but idle and iowait).
pub fn machine_busy() -> std::io::Result<Duration> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    parse_machine_busy_ticks(&stat)
        .map(|t| Duration::from_secs_f64(t as f64 / TICKS_PER_S))
        .ok_or_else(|| std::io::Error::other("unreadable /proc/stat"))
}

/// CPU use of a phase: the server, the bench, and everything else on the machine.
#[derive(Debug, Clone, Copy)]
pub struct PhaseCpu {
    server: CpuMeter,
    bench: CpuMeter,
    machine: Duration,
}

/// Average cores busy over a phase.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct CpuSplit {
    pub server_cores: f64,
    pub bench_cores: f64,
    /// Other processes on the box (other tenants, the kernel's own threads).
    pub other_cores: f64,
}

impl PhaseCpu {
    pub fn start(server_pid: u32) -> std::io::Result<PhaseCpu> {
        Ok(PhaseCpu {
            server: CpuMeter::start(server_pid)?,
            bench: CpuMeter::start(std::process::id())?,
            machine: machine_busy()?,
        })
    }

    pub fn split(&self) -> std::io::Result<CpuSplit> {
        let wall = self.server.at.elapsed().as_secs_f64();
        let machine = machine_busy()?.saturating_sub(self.machine).as_secs_f64();
        let (server_cores, bench_cores) = (self.server.cores()?, self.bench.cores()?);
        let machine_cores = if wall > 0.0 { machine / wall } else { 0.0 };
        Ok(CpuSplit {
            server_cores,
            bench_cores,
            other_cores: (machine_cores - server_cores - bench_cores).max(0.0),
        })
    }
}

fn parse_machine_busy_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|w| w.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice: already in user]
    let total: u64 = ticks.iter().take(8).sum();
    Some(total - ticks.get(3)? - ticks.get(4)?)
}

fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let mut words = line.split_whitespace().skip(1);
    let n: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") | None => Some(n * 1024),
        Some(_) => None,
    }
}

/// utime + stime: fields 14 and 15, counted after the `(comm)` field, which may itself
/// contain spaces and parentheses (so everything up to its last ')' is skipped).
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is field 14, stime field 15.
    let utime: u64 = fields.get(14 - 3)?.parse().ok()?;
    let stime: u64 = fields.get(15 - 3)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_vm_rss_in_kib() {
        let status = "Name:\tsluice\nVmPeak:\t  999 kB\nVmRSS:\t  123456 kB\nThreads:\t9\n";
        assert_eq!(parse_vm_rss(status), Some(123_456 * 1024));
        assert_eq!(parse_vm_rss("Name:\tx\n"), None);
    }

    #[test]
    fn parses_cpu_ticks_even_with_odd_process_names() {
        let stat = "4242 (tokio (rt) 1) S 1 4242 4242 0 -1 4194560 500 0 0 0 \
                    1234 567 0 0 20 0 9 0 100 1000 200 18446744073709551615";
        assert_eq!(parse_cpu_ticks(stat), Some(1234 + 567));
        assert_eq!(parse_cpu_ticks("garbage"), None);
    }

    #[test]
    fn machine_busy_leaves_out_idle_and_iowait() {
        let stat = "cpu  100 5 50 1000 20 1 2 3 0 0\ncpu0 50 2 25 500 10 0 1 1 0 0\n";
        assert_eq!(
            parse_machine_busy_ticks(stat),
            Some(100 + 5 + 50 + 1 + 2 + 3)
        );
        assert_eq!(parse_machine_busy_ticks("intr 1 2"), None);
    }

    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        assert!(rss_bytes(me).unwrap() > 1024 * 1024);
        let meter = CpuMeter::start(me).unwrap();
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(50) {
            std::hint::black_box(0u64);
        }
        assert!(meter.cores().unwrap() >= 0.0);
        let phase = PhaseCpu::start(me).unwrap();
        let split = phase.split().unwrap();
        assert!(split.server_cores >= 0.0 && split.other_cores >= 0.0);
    }
}
