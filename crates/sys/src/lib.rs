//! The one place im-bridge asks the operating system for something the standard library
//! cannot, kept apart so that every other crate can keep `#![forbid(unsafe_code)]`.
//!
//! [`release_startup_pages`] gives back the pages of the executable that start-up touched
//! and an idle daemon does not use (issue 35). Most of an idle daemon's resident memory is
//! not allocations but its own code: start-up runs the command line, configuration,
//! catalogs, TLS and store set-up scattered over the binary, and the kernel maps the cached
//! pages around each page touched (fault-around), so about 13 of the binary's 22 MB of code
//! stay resident although the idle loop uses under 4 MB of it. After start-up the daemon
//! advises the kernel to page its executable's read-only mappings out (`MADV_PAGEOUT`):
//! their contents never change (they are the file's), code the daemon runs again is read
//! back in on its first use, and the rest stops counting against the process.
#![deny(unsafe_code)]

use std::io;

/// What [`release_startup_pages`] advised the kernel about.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Released {
    /// How many of the executable's read-only mappings were advised.
    pub mappings: usize,
    /// Their total size in bytes (advised, not necessarily resident before).
    pub bytes: u64,
}

/// Advises the kernel to page out every read-only, private mapping of the running
/// executable (its code and read-only data). Non-destructive: a page's contents stay what
/// the file holds, and a page used again is read back on its first access. Mappings that
/// are writable, or were written (relocated data), are not touched or not reclaimable;
/// pages another process maps too (a second daemon from the same file) stay resident.
///
/// Linux only (5.4 or later); elsewhere it returns [`io::ErrorKind::Unsupported`]. Blocking
/// (reads `/proc/self/maps`): call it from a blocking thread.
pub fn release_startup_pages() -> io::Result<Released> {
    imp::release_startup_pages()
}

/// The process's resident set (`VmRSS`) in bytes, for logging what a release gave back.
/// Linux only; elsewhere [`io::ErrorKind::Unsupported`]. Blocking.
pub fn resident_bytes() -> io::Result<u64> {
    imp::resident_bytes()
}

/// A line of `/proc/self/maps`: `start-end perms offset major:minor inode path`.
#[derive(Debug, PartialEq, Eq)]
struct Mapping {
    start: usize,
    end: usize,
    readable: bool,
    writable: bool,
    private: bool,
    device: (u32, u32),
    inode: u64,
}

impl Mapping {
    fn parse(line: &str) -> Option<Self> {
        let mut fields = line.split_ascii_whitespace();
        let (start, end) = fields.next()?.split_once('-')?;
        let perms = fields.next()?.as_bytes();
        let _offset = fields.next()?;
        let (major, minor) = fields.next()?.split_once(':')?;
        let inode = fields.next()?.parse().ok()?;
        Some(Self {
            start: usize::from_str_radix(start, 16).ok()?,
            end: usize::from_str_radix(end, 16).ok()?,
            readable: perms.first() == Some(&b'r'),
            writable: perms.get(1) == Some(&b'w'),
            private: perms.get(3) == Some(&b'p'),
            device: (
                u32::from_str_radix(major, 16).ok()?,
                u32::from_str_radix(minor, 16).ok()?,
            ),
            inode,
        })
    }

    /// Whether this is a read-only private mapping of the file `(device, inode)`.
    fn is_read_only_view_of(&self, device: (u32, u32), inode: u64) -> bool {
        self.readable
            && !self.writable
            && self.private
            && self.inode == inode
            && self.device == device
            && self.end > self.start
    }
}

/// Splits a Linux `st_dev` into (major, minor), as glibc's `gnu_dev_major`/`minor` do.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn split_device(dev: u64) -> (u32, u32) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    // Both fit in 32 bits by construction of the encoding.
    (
        u32::try_from(major).unwrap_or(u32::MAX),
        u32::try_from(minor).unwrap_or(u32::MAX),
    )
}

/// `VmRSS:    1234 kB` from `/proc/self/status`, in bytes.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kb: u64 = line
        .trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kb.checked_mul(1024)
}

#[cfg(target_os = "linux")]
mod imp {
    use std::io;
    use std::os::unix::fs::MetadataExt;

    use super::{Mapping, Released, parse_vm_rss, split_device};

    pub(super) fn release_startup_pages() -> io::Result<Released> {
        let exe = std::fs::metadata("/proc/self/exe")?;
        let (device, inode) = (split_device(exe.dev()), exe.ino());
        let maps = std::fs::read_to_string("/proc/self/maps")?;
        let mut released = Released::default();
        for mapping in maps.lines().filter_map(Mapping::parse) {
            if !mapping.is_read_only_view_of(device, inode) {
                continue;
            }
            page_out(&mapping)?;
            released.mappings += 1;
            released.bytes += (mapping.end - mapping.start) as u64;
        }
        Ok(released)
    }

    /// `madvise(MADV_PAGEOUT)` over one mapping.
    #[allow(unsafe_code)]
    fn page_out(mapping: &Mapping) -> io::Result<()> {
        let len = mapping.end - mapping.start;
        // SAFETY: MADV_PAGEOUT is non-destructive: it only asks the kernel to reclaim the
        // range's pages, whose contents are preserved (file-backed clean pages are re-read
        // from the file, anything else goes to swap or stays). No Rust value's bytes
        // change, so no reference into the range is invalidated. The range is a whole
        // mapping as the kernel listed it (page-aligned); if it was unmapped since, the
        // call fails with ENOMEM and nothing happens.
        let status =
            unsafe { libc::madvise(mapping.start as *mut libc::c_void, len, libc::MADV_PAGEOUT) };
        if status == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    pub(super) fn resident_bytes() -> io::Result<u64> {
        let status = std::fs::read_to_string("/proc/self/status")?;
        parse_vm_rss(&status)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no VmRSS line"))
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::io;

    use super::Released;

    pub(super) fn release_startup_pages() -> io::Result<Released> {
        Err(io::ErrorKind::Unsupported.into())
    }

    pub(super) fn resident_bytes() -> io::Result<u64> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_maps_line() {
        let line = "55d0c8a00000-55d0c9e00000 r-xp 00200000 fd:01 1234567                    /usr/bin/im-bridge";
        assert_eq!(
            Mapping::parse(line),
            Some(Mapping {
                start: 0x55d0_c8a0_0000,
                end: 0x55d0_c9e0_0000,
                readable: true,
                writable: false,
                private: true,
                device: (0xfd, 0x01),
                inode: 1_234_567,
            })
        );
        assert!(Mapping::parse("garbage").is_none());
        assert!(Mapping::parse("1-2 r-xp 0 fd:01 notanumber /x").is_none());
    }

    #[test]
    fn only_read_only_private_views_of_the_file_are_chosen() {
        let of = |line: &str| Mapping::parse(line).unwrap_or_else(|| panic!("parses: {line}"));
        let exe = ((0xfd, 0x01), 42);
        let chosen = |line| of(line).is_read_only_view_of(exe.0, exe.1);
        assert!(chosen("1000-2000 r-xp 0 fd:01 42 /bin/x"));
        assert!(chosen("2000-3000 r--p 0 fd:01 42 /bin/x (deleted)"));
        assert!(!chosen("3000-4000 rw-p 0 fd:01 42 /bin/x"), "writable data");
        assert!(!chosen("4000-5000 r-xs 0 fd:01 42 /bin/x"), "shared");
        assert!(
            !chosen("5000-6000 r-xp 0 fd:01 43 /lib/libc.so"),
            "another file"
        );
        assert!(
            !chosen("6000-7000 r-xp 0 fd:02 42 /other/x"),
            "another device"
        );
        assert!(!chosen("7000-8000 ---p 0 fd:01 42 /bin/x"), "a guard");
    }

    #[test]
    fn splits_device_numbers_like_glibc() {
        // makedev(253, 1) in glibc's encoding.
        assert_eq!(split_device(0xfd01), (253, 1));
        // makedev(259, 0x12345): minor's low byte, major, then minor's upper bits.
        let big = 0x45 | (259 << 8) | (0x123 << 20);
        assert_eq!(split_device(big), (259, 0x12345));
    }

    #[test]
    fn reads_vm_rss() {
        let status = "Name:\tim-bridge\nVmHWM:\t  20480 kB\nVmRSS:\t  15360 kB\n";
        assert_eq!(parse_vm_rss(status), Some(15_360 * 1024));
        assert_eq!(parse_vm_rss("Name: x\n"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn releases_the_test_binarys_own_pages() {
        let released = release_startup_pages().unwrap_or_else(|e| panic!("released: {e}"));
        assert!(
            released.mappings >= 2,
            "code and read-only data: {released:?}"
        );
        assert!(released.bytes > 0);
        assert!(resident_bytes().unwrap_or_else(|e| panic!("VmRSS: {e}")) > 0);
    }
}
