//! Tuning of mimalloc, the allocator of the floe binary (and of the benchmarks, so their
//! figures are the server's). The binary declares `#[global_allocator]`; this module
//! only sets options.
//!
//! A sink's batches allocate and free hundreds of megabytes in bursts, about once per
//! commit interval. mimalloc returns freed memory to the OS after `purge_delay` (1 s by
//! default), so every burst faulted its pages in again: the kernel zeroing new pages took a
//! quarter of an UPSERT catch-up's time under perf. Ten seconds, jemalloc's default decay,
//! keeps a steady sink's memory in use while still returning a burst's memory when the
//! sink goes quiet.
//!
//! Transparent huge pages are turned off for the process, as Redis and MongoDB advise for
//! themselves. mimalloc asks for them on its arenas, and the kernel then zeroes 2 MiB at
//! each first touch; on the virtual machines floe was measured on, a fresh huge page ran at
//! about 200 MB/s against 2.5 GB/s for small pages, so a bulk load or a table's first query
//! spent most of its time in the kernel (COPY of 1M rows: 510k rows/s with huge pages,
//! 1.37M without; the first query after it: 357 ms, 198 ms). Setting
//! `MIMALLOC_ALLOW_THP=1` in the environment keeps them.

use std::os::raw::c_long;

/// How long freed memory stays with the process before it goes back to the OS.
pub const PURGE_DELAY_MS: c_long = 10_000;

/// `mi_option_purge_delay` and `mi_option_allow_thp` in mimalloc 3's `mi_option_e`
/// (libmimalloc-sys names no constant for them); [`tune`] checks the library is mimalloc
/// 3 before setting them.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
const MI_OPTION_ALLOW_THP: libmimalloc_sys::mi_option_t = 43;

/// The environment variable by which mimalloc takes `allow_thp`: when it is set, the
/// operator chose, and floe leaves huge pages as they said.
const ALLOW_THP_VARIABLE: &str = "MIMALLOC_ALLOW_THP";

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
    if std::env::var_os(ALLOW_THP_VARIABLE).is_none() {
        disable_huge_pages();
    }
    true
}

/// Huge pages off: mimalloc stops asking for them on new memory, and the kernel stops
/// giving them to memory mimalloc asked for before this ran (its first arena is reserved
/// at the process's first allocation, before `main`).
fn disable_huge_pages() {
    // SAFETY: an FFI call without pointers.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_ALLOW_THP, 0) };
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_SET_THP_DISABLE takes plain integers and changes only this
        // process's huge page policy.
        let result = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
        if result != 0 {
            tracing::warn!(
                error = %std::io::Error::last_os_error(),
                "could not turn transparent huge pages off for the process"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_purge_delay_is_set_and_huge_pages_are_off() {
        assert!(super::tune(), "mimalloc 3 is linked");
        // SAFETY: reads options.
        let (delay, allow_thp) = unsafe {
            (
                libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY),
                libmimalloc_sys::mi_option_get(super::MI_OPTION_ALLOW_THP),
            )
        };
        assert_eq!(delay, super::PURGE_DELAY_MS);
        if std::env::var_os(super::ALLOW_THP_VARIABLE).is_none() {
            assert_eq!(allow_thp, 0, "mimalloc's allow_thp is off");
            #[cfg(target_os = "linux")]
            {
                // SAFETY: reads this process's policy.
                let disabled = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
                assert_eq!(disabled, 1, "the kernel gives this process no huge pages");
            }
        }
    }
}
