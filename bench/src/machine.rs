//! What the figures were measured on: CPU, cores, kernel, clock source, glibc, rustc, Python,
//! libfaketime, the load of the machine, and the date.

use std::path::Path;

use crate::measure::first_line;

pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub kernel: String,
    pub clocksource: String,
    pub glibc: String,
    pub rustc: String,
    pub python: String,
    pub faketime: String,
    pub load_before: String,
    pub date: String,
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

pub fn load_average() -> String {
    read("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".into())
}

impl Machine {
    pub fn probe(faketime: Option<&Path>) -> Machine {
        let cpuinfo = read("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let cores = cpuinfo
            .lines()
            .filter(|l| l.starts_with("processor"))
            .count()
            .max(1);
        let glibc = first_line("ldd", &["--version"])
            .and_then(|l| l.rsplit(' ').next().map(str::to_string))
            .unwrap_or_else(|| "unknown".into());
        let faketime = match faketime {
            None => "not installed".into(),
            Some(_) => first_line("dpkg-query", &["-W", "-f", "${Version}", "faketime"])
                .map(|v| format!("Debian faketime {v}"))
                .unwrap_or_else(|| "installed".into()),
        };
        Machine {
            cpu,
            cores,
            kernel: read("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown".into()),
            clocksource: read("/sys/devices/system/clocksource/clocksource0/current_clocksource")
                .unwrap_or_else(|| "unknown".into()),
            glibc,
            rustc: first_line("rustc", &["--version"]).unwrap_or_else(|| "unknown".into()),
            python: first_line("python3", &["--version"]).unwrap_or_else(|| "not found".into()),
            faketime,
            load_before: load_average(),
            date: utc_now(),
        }
    }
}

/// Now as `YYYY-MM-DD HH:MM UTC`, from the system clock (civil-from-days, no time crate).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// Howard Hinnant's days-to-civil conversion.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_454), (2026, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }
}
