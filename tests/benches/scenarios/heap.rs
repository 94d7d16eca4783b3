//! The bench's allocator: the system's (or mimalloc, with `TRIBUTARY_BENCH_ALLOCATOR=
//! mimalloc`, to weigh one against the other in whole runs), counting live bytes, so a
//! scenario reports the peak of its own allocations apart from what the allocator keeps
//! resident (glibc holds freed memory in per-thread arenas, so resident memory can grow
//! past the live peak).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Off in a process that only serves (the http scenario's server): its allocations are
/// then the system allocator's alone, as in `tributary serve`, with no shared counter.
static COUNTING: AtomicBool = AtomicBool::new(true);

/// Stop counting for the rest of this process.
pub fn stop_counting() {
    COUNTING.store(false, Ordering::Relaxed);
}

fn counting() -> bool {
    COUNTING.load(Ordering::Relaxed)
}

fn grew(bytes: usize) {
    let now = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

/// Which allocator serves this process: decided at its first allocation (before any
/// thread starts) from the environment, then fixed, so every block is freed by the
/// allocator that gave it.
static CHOICE: AtomicU8 = AtomicU8::new(UNDECIDED);
const UNDECIDED: u8 = 0;
const SYSTEM: u8 = 1;
const MIMALLOC: u8 = 2;

fn mimalloc() -> bool {
    match CHOICE.load(Ordering::Relaxed) {
        UNDECIDED => {
            // SAFETY: getenv and strcmp read NUL-terminated strings: the environment's
            // and these literals; getenv allocates nothing.
            let chosen = unsafe {
                let value = libc::getenv(c"TRIBUTARY_BENCH_ALLOCATOR".as_ptr());
                !value.is_null() && libc::strcmp(value, c"mimalloc".as_ptr()) == 0
            };
            CHOICE.store(if chosen { MIMALLOC } else { SYSTEM }, Ordering::Relaxed);
            chosen
        }
        choice => choice == MIMALLOC,
    }
}

/// The name of the allocator serving this process, for the reports.
pub fn allocator() -> &'static str {
    if mimalloc() {
        "mimalloc"
    } else {
        "system"
    }
}

// SAFETY: every call is passed to the chosen allocator unchanged; only counters move.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let ptr = unsafe {
            if mimalloc() {
                mimalloc::MiMalloc.alloc(layout)
            } else {
                System.alloc(layout)
            }
        };
        if !ptr.is_null() && counting() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let ptr = unsafe {
            if mimalloc() {
                mimalloc::MiMalloc.alloc_zeroed(layout)
            } else {
                System.alloc_zeroed(layout)
            }
        };
        if !ptr.is_null() && counting() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe {
            if mimalloc() {
                mimalloc::MiMalloc.dealloc(ptr, layout)
            } else {
                System.dealloc(ptr, layout)
            }
        };
        if counting() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let moved = unsafe {
            if mimalloc() {
                mimalloc::MiMalloc.realloc(ptr, layout, new_size)
            } else {
                System.realloc(ptr, layout, new_size)
            }
        };
        if !moved.is_null() && counting() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        moved
    }
}

const MIB: f64 = 1024.0 * 1024.0;

/// Start a measurement: the live heap now, in MiB (the peak restarts from it).
pub fn reset_peak() -> f64 {
    let now = LIVE.load(Ordering::Relaxed);
    PEAK.store(now, Ordering::Relaxed);
    now as f64 / MIB
}

/// The live heap's peak since [`reset_peak`], in MiB.
pub fn peak() -> f64 {
    PEAK.load(Ordering::Relaxed) as f64 / MIB
}
