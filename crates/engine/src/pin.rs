//! Pinning worker threads to CPUs (NTttcp's thread-to-processor mapping), and parsing CPU lists such as
//! `0,2-3` as taskset and the kernel write them.

/// Parses `0,2-3,8` into `[0, 2, 3, 8]`.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let mut out = vec![];
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("'{part}' in CPU list '{s}' is not a CPU number or range like 2-5");
        match part.split_once('-') {
            Some((a, b)) => {
                let a: usize = a.trim().parse().map_err(|_| bad())?;
                let b: usize = b.trim().parse().map_err(|_| bad())?;
                if a > b || b > 4095 {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    if out.is_empty() {
        return Err(format!("CPU list '{s}' is empty"));
    }
    if let Some(&c) = out.iter().find(|&&c| c > 4095) {
        return Err(format!("CPU {c} in '{s}' is out of range"));
    }
    Ok(out)
}

pub use crate::os::{allowed_cpus, pin_current_thread};

/// Checks that every CPU of a pinning list is one this process may use.
pub fn check_cpus(list: &[usize]) -> Result<(), String> {
    let allowed = allowed_cpus();
    match list.iter().find(|c| !allowed.contains(c)) {
        Some(c) => Err(format!(
            "CPU {c} is not available here (usable CPUs: {allowed:?})"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_and_ranges() {
        assert_eq!(parse_cpu_list("0,2-3,8").unwrap(), vec![0, 2, 3, 8]);
        assert_eq!(parse_cpu_list("1").unwrap(), vec![1]);
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
        assert!(parse_cpu_list("").is_err());
        assert!(parse_cpu_list("99999").is_err());
    }

    #[test]
    fn unusable_cpus_are_named() {
        assert!(check_cpus(&[0]).is_ok());
        let e = check_cpus(&[4000]).unwrap_err();
        assert!(e.contains("CPU 4000"), "{e}");
    }

    #[test]
    fn pins_to_cpu_zero() {
        std::thread::spawn(|| pin_current_thread(0).unwrap())
            .join()
            .unwrap();
    }
}
