//! Asking the allocator to hand free memory back to the OS before RSS is sampled.
//!
//! glibc keeps freed pages inside its heaps (a high-water mark of the busiest moment so far),
//! so a process whose live memory is flat can still show RSS creeping up round after round.
//! `malloc_trim(0)` releases every whole free page of every arena, after which RSS follows the
//! live heap: growth that remains is memory still in use. Elsewhere this is a no-op.

/// Releases the allocator's free pages (glibc); returns whether anything was released.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn release_free_memory() -> bool {
    // SAFETY: `malloc_trim` takes no pointers and only walks the allocator's own free lists
    // under its locks; glibc documents it as safe to call at any time from any thread.
    unsafe { libc::malloc_trim(0) == 1 }
}

/// Releases the allocator's free pages (no-op on this platform).
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_free_memory() -> bool {
    false
}
