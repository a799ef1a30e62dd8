//! PID 1 inside the guest: mounts, hostname, then the control service as a
//! child, and reaping every orphan until that child exits, at which point
//! the VM powers off.
//!
//! Kept synchronous and small on purpose: a PID 1 that panics takes the
//! kernel with it, and tokio's child handling would race this reaper. All
//! real work happens in the `serve` child.

use std::ffi::CString;
use std::process::Command;

use nix::mount::{MsFlags, mount};
use nix::sys::reboot::{RebootMode, reboot};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

fn mount_one(source: &str, target: &str, fstype: &str, flags: MsFlags, data: Option<&str>) {
    let _ = std::fs::create_dir_all(target);
    if let Err(e) = mount(Some(source), target, Some(fstype), flags, data) {
        // EBUSY: already mounted (devtmpfs by the kernel); anything else is
        // worth a line on the console but not worth dying for.
        if e != nix::errno::Errno::EBUSY {
            eprintln!("patchpilot-guest init: mount {fstype} on {target}: {e}");
        }
    }
}

/// Runs as PID 1; never returns.
pub fn run() -> ! {
    let nosuid = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount_one("proc", "/proc", "proc", nosuid, None);
    mount_one("sysfs", "/sys", "sysfs", nosuid, None);
    mount_one("devtmpfs", "/dev", "devtmpfs", MsFlags::MS_NOSUID, Some("mode=0755"));
    mount_one(
        "devpts",
        "/dev/pts",
        "devpts",
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("gid=5,mode=620,ptmxmode=666"),
    );
    mount_one("tmpfs", "/dev/shm", "tmpfs", MsFlags::MS_NOSUID | MsFlags::MS_NODEV, None);
    mount_one("tmpfs", "/run", "tmpfs", MsFlags::MS_NOSUID | MsFlags::MS_NODEV, Some("mode=0755"));
    mount_one("cgroup2", "/sys/fs/cgroup", "cgroup2", nosuid, None);
    mount_one("tmpfs", "/tmp", "tmpfs", MsFlags::MS_NOSUID | MsFlags::MS_NODEV, None);
    let _ = nix::unistd::sethostname("sandbox");
    let _ = std::os::unix::fs::symlink("/proc/self/fd", "/dev/fd");

    // The control service gets a clean environment: the kernel hands PID 1
    // unknown boot parameters as variables, and nothing of that belongs in
    // the agent's world.
    let serve = Command::new("/usr/local/bin/patchpilot-guest")
        .arg("serve")
        .env_clear()
        .env("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        .env("HOME", "/root")
        .env("RUST_LOG", "info")
        .spawn();
    let serve_pid = match serve {
        Ok(child) => Pid::from_raw(child.id() as i32),
        Err(e) => {
            eprintln!("patchpilot-guest init: cannot start the control service: {e}");
            power_off();
        }
    };
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::__WALL)) {
            Ok(WaitStatus::Exited(pid, code)) if pid == serve_pid => {
                if code != 0 {
                    eprintln!("patchpilot-guest init: control service exited with {code}");
                }
                power_off();
            }
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == serve_pid => {
                eprintln!("patchpilot-guest init: control service killed by {signal}");
                power_off();
            }
            Ok(_) => {}
            Err(nix::errno::Errno::ECHILD) => power_off(),
            Err(_) => {}
        }
    }
}

fn power_off() -> ! {
    nix::unistd::sync();
    // The VMMs run the guest with reboot meaning exit (-no-reboot for QEMU,
    // reboot=k for Firecracker), so a reboot ends the VM on both.
    let _ = reboot(RebootMode::RB_AUTOBOOT);
    // Unreachable unless reboot failed; PID 1 must not exit.
    let _ = CString::new("halt");
    loop {
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
}
