//! The process's allocator, chosen by what the process runs: `tributary serve` takes
//! mimalloc, every other command the system's (glibc's, with large blocks mapped on their
//! own, see `map_large_allocations`).
//!
//! Measured side by side (`cargo xtask bench --only=http,fold_merge`, a server process and
//! a fold process on these 2-core machines): under glibc a server answering one-line
//! ingest requests spends a quarter of its CPU inside malloc and free (`_int_malloc`,
//! `malloc_consolidate`, `unlink_chunk`); mimalloc takes its CPU per request from 397 to
//! 232 µs at 64 producers and its acked rows from 3.2k to 5.1k a second. A fold of 1M rows
//! under mimalloc took longer (2.8 vs 2.2 s) and peaked higher (614 vs 477 MiB), so the
//! commands that fold in the foreground keep glibc.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU8, Ordering};

pub struct ByCommand;

static CHOICE: AtomicU8 = AtomicU8::new(UNDECIDED);
const UNDECIDED: u8 = 0;
const SYSTEM: u8 = 1;
const MIMALLOC: u8 = 2;

/// Decided at the process's first allocation (before any thread starts), then fixed:
/// every block is freed by the allocator that gave it.
fn serving() -> bool {
    match CHOICE.load(Ordering::Relaxed) {
        UNDECIDED => {
            let serving = an_argument_is_serve();
            CHOICE.store(if serving { MIMALLOC } else { SYSTEM }, Ordering::Relaxed);
            serving
        }
        choice => choice == MIMALLOC,
    }
}

/// Whether an argument of this process is `serve`, read from `/proc/self/cmdline` into a
/// buffer on the stack: nothing may allocate here. A graph named `serve` in another
/// command only gets mimalloc, which serves it as well.
#[cfg(target_os = "linux")]
fn an_argument_is_serve() -> bool {
    let mut buffer = [0u8; 4096];
    // SAFETY: open, read and close on a NUL-terminated literal path and a buffer of the
    // length passed; no memory of Rust's is handed over beyond the call.
    let read = unsafe {
        let fd = libc::open(
            c"/proc/self/cmdline".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return false;
        }
        let read = libc::read(fd, buffer.as_mut_ptr().cast(), buffer.len());
        libc::close(fd);
        read
    };
    let Ok(read) = usize::try_from(read) else {
        return false;
    };
    buffer[..read]
        .split(|&b| b == 0)
        .skip(1)
        .any(|argument| argument == b"serve")
}

#[cfg(not(target_os = "linux"))]
fn an_argument_is_serve() -> bool {
    false
}

// SAFETY: every call is passed unchanged to the allocator chosen once for the process.
unsafe impl GlobalAlloc for ByCommand {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe {
            if serving() {
                mimalloc::MiMalloc.alloc(layout)
            } else {
                System.alloc(layout)
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe {
            if serving() {
                mimalloc::MiMalloc.alloc_zeroed(layout)
            } else {
                System.alloc_zeroed(layout)
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe {
            if serving() {
                mimalloc::MiMalloc.dealloc(ptr, layout)
            } else {
                System.dealloc(ptr, layout)
            }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe {
            if serving() {
                mimalloc::MiMalloc.realloc(ptr, layout, new_size)
            } else {
                System.realloc(ptr, layout, new_size)
            }
        }
    }
}
