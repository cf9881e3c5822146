//! Free loopback ports.
//!
//! Ports are handed out from 20000..32000, below Linux's ephemeral range (32768+), so an
//! outgoing connection of some peer never takes a port we chose and have not bound yet.
//! A process-wide cursor (starting at a pid-dependent offset) keeps concurrent tests and
//! concurrent test binaries apart; each candidate is checked by binding it.

use std::net::{Ipv4Addr, TcpListener};
use std::sync::Mutex;

const LOW: u32 = 20000;
const HIGH: u32 = 32000;

static CURSOR: Mutex<Option<u32>> = Mutex::new(None);

/// A TCP port on 127.0.0.1 that is free right now.
pub fn free_port() -> u16 {
    let mut cursor = CURSOR.lock().unwrap_or_else(|e| e.into_inner());
    let mut next = cursor.unwrap_or_else(|| {
        let random = u32::from_str_radix(&crate::random_hex(4), 16).unwrap_or(0);
        LOW + (std::process::id().wrapping_mul(7919) ^ random) % (HIGH - LOW)
    });
    for _ in 0..(HIGH - LOW) {
        let port = next;
        next = if next + 1 >= HIGH { LOW } else { next + 1 };
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port as u16)).is_ok() {
            *cursor = Some(next);
            return port as u16;
        }
    }
    panic!("no free TCP port on 127.0.0.1 in {LOW}..{HIGH}");
}

/// `n` distinct free ports.
pub(crate) fn free_ports(n: usize) -> Vec<u16> {
    (0..n).map(|_| free_port()).collect()
}
