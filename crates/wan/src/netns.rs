//! Network namespaces and the TUN devices inside them. Namespaces are named (`lsw-NAME-a`, `lsw-NAME-b`
//! under /run/netns, the convention `ip netns` uses) so that users can also reach them with `ip netns
//! exec`, and so that leftovers of a killed emulator can be found by prefix and removed. Configuration goes
//! through iproute2's `ip`, which every Linux host that can run the emulator has.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::Command;

/// Prefix of every namespace the emulator creates.
pub const PREFIX: &str = "lsw-";
/// The TUN device's name inside each namespace.
pub const DEVICE: &str = "wan0";

/// Why a namespace or device could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// `ip` could not be run.
    #[error("cannot run `ip {args}`: {source} (install iproute2)")]
    Spawn {
        /// Its arguments.
        args: String,
        /// Why it could not run.
        source: io::Error,
    },
    /// `ip` failed.
    #[error("`ip {args}` failed: {stderr}")]
    Ip {
        /// Its arguments.
        args: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// This thread could not enter the namespace.
    #[error("cannot enter network namespace {name}: {source}")]
    Enter {
        /// The namespace.
        name: String,
        /// Why not.
        source: io::Error,
    },
    /// The TUN device could not be made.
    #[error("cannot create the TUN device in {name}: {source}")]
    Tun {
        /// The namespace.
        name: String,
        /// Why not.
        source: io::Error,
    },
}

/// Runs `ip ARGS...`, turning a failure into an error that quotes ip's own message.
pub fn ip(args: &[&str]) -> Result<(), NetnsError> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|source| NetnsError::Spawn {
            args: args.join(" "),
            source,
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(NetnsError::Ip {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// The namespace name of host `side` ('a' or 'b') of emulator `name`.
pub fn ns_name(name: &str, side: char) -> String {
    format!("{PREFIX}{name}-{side}")
}

/// The file that holds namespace `ns` (/run/netns/NS).
pub fn ns_path(ns: &str) -> PathBuf {
    PathBuf::from("/run/netns").join(ns)
}

/// Every namespace whose name has the emulator's prefix.
pub fn list_ours() -> Vec<String> {
    std::fs::read_dir("/run/netns")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with(PREFIX))
                .collect()
        })
        .unwrap_or_default()
}

/// The processes whose network namespace is `ns`, as `ip netns pids` finds them: those whose
/// /proc/PID/ns/net is the same namespace file (device and inode) as /run/netns/NS.
pub fn pids(ns: &str) -> Vec<libc::pid_t> {
    use std::os::unix::fs::MetadataExt;
    let Ok(target) = std::fs::metadata(ns_path(ns)) else {
        return Vec::new();
    };
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter(|pid| {
            std::fs::metadata(format!("/proc/{pid}/ns/net"))
                .is_ok_and(|m| m.dev() == target.dev() && m.ino() == target.ino())
        })
        .collect()
}

/// Whether namespace `ns` exists.
pub fn exists(ns: &str) -> bool {
    ns_path(ns).exists()
}

/// Creates namespace `ns` (`ip netns add`).
pub fn create(ns: &str) -> Result<(), NetnsError> {
    ip(&["netns", "add", ns])
}

/// Deletes a namespace; deleting one that does not exist is not an error.
pub fn delete(ns: &str) -> Result<(), NetnsError> {
    if !exists(ns) {
        return Ok(());
    }
    ip(&["netns", "del", ns])
}

/// Moves the calling thread into namespace `ns` (network namespaces are per thread).
pub fn enter(ns: &str) -> Result<(), NetnsError> {
    let err = |source| NetnsError::Enter {
        name: ns.into(),
        source,
    };
    let f = File::open(ns_path(ns)).map_err(err)?;
    // SAFETY: plain syscall on a descriptor we own.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(err(io::Error::last_os_error()));
    }
    Ok(())
}

/// Gives this process its own mount namespace with a sysfs of the network namespace it is in, as
/// `ip netns exec` does, so /sys/class/net shows the namespace's interfaces (their MTU, queue length)
/// to the command run in it. The host's control groups (/sys/fs/cgroup and the hierarchies mounted
/// under it) stay visible, as on a real host: a command in a CPU quota reads it and its throttling
/// (the limit report's evidence). Best effort: where it fails (false) the command sees the host's
/// sysfs; where only the control groups cannot be kept, it sees none.
#[must_use]
pub fn remount_sys() -> bool {
    // SAFETY: plain syscalls with NUL-terminated constant strings; the process is single-threaded here
    // (called just before exec).
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return false;
        }
        let none = c"none";
        if libc::mount(
            none.as_ptr(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_SLAVE | libc::MS_REC,
            std::ptr::null(),
        ) != 0
        {
            return false;
        }
        let cgroups = clone_cgroups();
        libc::umount2(c"/sys".as_ptr(), libc::MNT_DETACH);
        let mounted = libc::mount(
            c"sysfs".as_ptr(),
            c"/sys".as_ptr(),
            c"sysfs".as_ptr(),
            0,
            std::ptr::null(),
        ) == 0;
        if let (true, Some(tree)) = (mounted, cgroups) {
            attach_cgroups(tree);
        }
        mounted
    }
}

/// A detached copy of the mount tree at /sys/fs/cgroup (open_tree(2), Linux 5.2), taken before /sys is
/// replaced; None where the kernel lacks it or nothing is mounted there.
fn clone_cgroups() -> Option<OwnedFd> {
    const OPEN_TREE_CLONE: libc::c_long = 1;
    const AT_RECURSIVE: libc::c_long = 0x8000;
    // SAFETY: open_tree with a NUL-terminated path; it returns a new descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            c"/sys/fs/cgroup".as_ptr(),
            OPEN_TREE_CLONE | AT_RECURSIVE | libc::O_CLOEXEC as libc::c_long,
        )
    };
    // SAFETY: a descriptor open_tree just returned, owned from here on.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Mounts the copied control groups at the new sysfs's /sys/fs/cgroup (move_mount(2)); best effort.
fn attach_cgroups(tree: OwnedFd) {
    const MOVE_MOUNT_F_EMPTY_PATH: libc::c_long = 4;
    // SAFETY: move_mount from a descriptor open_tree returned onto a NUL-terminated path.
    unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            c"/sys/fs/cgroup".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        );
    }
}

#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// Creates the TUN device `wan0` inside namespace `ns` and returns its descriptor (non-blocking). The
/// device is not persistent: it disappears with the last descriptor, so a killed emulator leaves none.
pub fn open_tun(ns: &str) -> Result<OwnedFd, NetnsError> {
    let ns_owned = ns.to_string();
    let r = std::thread::scope(|s| {
        s.spawn(move || -> Result<OwnedFd, NetnsError> {
            enter(&ns_owned)?;
            let err = |source| NetnsError::Tun {
                name: ns_owned.clone(),
                source,
            };
            let path = c"/dev/net/tun";
            // SAFETY: a NUL-terminated path and plain flags.
            let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC | libc::O_NONBLOCK) };
            if fd < 0 {
                return Err(err(io::Error::last_os_error()));
            }
            // SAFETY: `fd` was just opened and is owned by nobody else.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            let mut req = IfReq {
                name: [0; libc::IFNAMSIZ],
                flags: (libc::IFF_TUN | libc::IFF_NO_PI | libc::IFF_VNET_HDR) as libc::c_short,
                _pad: [0; 22],
            };
            req.name[..DEVICE.len()].copy_from_slice(DEVICE.as_bytes());
            // SAFETY: TUNSETIFF reads and writes an ifreq, which `req` is laid out as.
            if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut req) } < 0 {
                return Err(err(io::Error::last_os_error()));
            }
            offload(&fd);
            Ok(fd)
        })
        .join()
    });
    r.unwrap_or_else(|_| {
        Err(NetnsError::Tun {
            name: ns.into(),
            source: io::Error::other("thread panicked"),
        })
    })
}

/// Lets the host's stack hand the device TCP trains (GSO, up to 64 KiB) with checksums left to the
/// device, which the forwarder cuts into wire packets for the model (`train`). A kernel that refuses
/// leaves the device on single packets, each with its virtio-net header, which the forwarder takes too.
fn offload(fd: &OwnedFd) {
    let features = libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6;
    // SAFETY: TUNSETOFFLOAD takes its flags as the integer argument.
    unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETOFFLOAD, libc::c_ulong::from(features)) };
}

/// Brings up loopback and the TUN device with its addresses (IPv4 and IPv6) and MTU.
pub fn configure(ns: &str, mtu: u32, v4: &str, v6: &str) -> Result<(), NetnsError> {
    let mtu = mtu.to_string();
    ip(&["-n", ns, "link", "set", "lo", "up"])?;
    // A long TUN ring: packets wait there (not dropped) when the forwarder is briefly descheduled.
    ip(&[
        "-n",
        ns,
        "link",
        "set",
        DEVICE,
        "mtu",
        &mtu,
        "txqueuelen",
        "10000",
        "up",
    ])?;
    ip(&["-n", ns, "addr", "add", &format!("{v4}/24"), "dev", DEVICE])?;
    ip(&[
        "-n",
        ns,
        "-6",
        "addr",
        "add",
        &format!("{v6}/64"),
        "dev",
        DEVICE,
        "nodad",
    ])?;
    Ok(())
}
