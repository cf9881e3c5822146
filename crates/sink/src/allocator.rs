//! Tuning of mimalloc, the allocator of the floe binary (and of the sink benchmark, so its
//! figures are the server's). The binary declares `#[global_allocator]`; this module
//! only sets options.
//!
//! A sink's batches allocate and free hundreds of megabytes in bursts, about once per
//! commit interval. mimalloc returns freed memory to the OS after `purge_delay` (1 s by
//! default), so every burst faulted its pages in again: the kernel zeroing new pages took a
//! quarter of an UPSERT catch-up's time under perf. Ten seconds, jemalloc's default decay,
//! keeps a steady sink's memory in use while still returning a burst's memory when the
//! sink goes quiet.

use std::os::raw::c_long;

/// How long freed memory stays with the process before it goes back to the OS.
pub const PURGE_DELAY_MS: c_long = 10_000;

/// `mi_option_purge_delay` in mimalloc 3's `mi_option_e` (libmimalloc-sys names no constant
/// for it); [`tune`] checks the library is mimalloc 3 before setting it.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Sets floe's allocator options. Returns `false` (and changes nothing) when the linked
/// mimalloc is not version 3, whose option numbering this relies on.
pub fn tune() -> bool {
    // SAFETY: plain FFI calls into mimalloc without pointers; options may be set at any
    // time.
    unsafe {
        if libmimalloc_sys::mi_version() / 10_000 != 3 {
            return false;
        }
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS);
    }
    true
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_purge_delay_is_set() {
        assert!(super::tune(), "mimalloc 3 is linked");
        // SAFETY: reads an option.
        let delay = unsafe { libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY) };
        assert_eq!(delay, super::PURGE_DELAY_MS);
    }
}
