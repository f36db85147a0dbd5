//! Asymmetric fences: a [`light`] fence that costs nothing on the fast
//! side of a protocol and a [`heavy`] one on its slow side that together
//! order as two `SeqCst` fences would (the pairing of folly's
//! `asymmetric_thread_fence_light/heavy`, and of Linux's `membarrier(2)`
//! documentation).
//!
//! The heavy fence is `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`: the
//! kernel makes every thread of this process that is running execute a
//! full memory barrier before the call returns, so the light side needs
//! only to keep the compiler from reordering. Where the process cannot
//! register for it (not Linux, a kernel before 4.14, a seccomp filter),
//! both sides fall back to `SeqCst` fences; the choice is made once, before
//! any fence is used, and both sides follow it.

use std::sync::Once;
use std::sync::atomic::AtomicBool;

use super::atomic::{Ordering, compiler_fence, fence};

/// Whether the heavy fence is `membarrier` (and the light one free). Set
/// once by [`prepare`], before any fence is used.
static ASYMMETRIC: AtomicBool = AtomicBool::new(false);

/// Whether the heavy fence is `membarrier`: a load, on every light fence.
#[inline]
fn asymmetric() -> bool {
    ASYMMETRIC.load(std::sync::atomic::Ordering::Relaxed)
}

#[cfg(all(target_os = "linux", not(loom)))]
fn register() -> bool {
    use rustix::thread::{MembarrierCommand, membarrier};
    membarrier(MembarrierCommand::RegisterPrivateExpedited).is_ok()
}

#[cfg(not(all(target_os = "linux", not(loom))))]
fn register() -> bool {
    false
}

/// Makes the fences ready; call before the first [`light`] fence of a
/// protocol, so that both sides agree on what the fences are (whoever
/// later uses a fence of the protocol was handed its state after this
/// returned, and so sees the flag).
pub(crate) fn prepare() {
    static PREPARED: Once = Once::new();
    PREPARED.call_once(|| ASYMMETRIC.store(register(), std::sync::atomic::Ordering::Relaxed));
}

/// The fast side's fence: a compiler fence when the slow side uses
/// `membarrier`, a `SeqCst` fence otherwise.
#[inline]
pub(crate) fn light() {
    if asymmetric() {
        compiler_fence(Ordering::SeqCst);
    } else {
        fence(Ordering::SeqCst);
    }
}

/// The slow side's fence: `membarrier` when registered (every running
/// thread of the process executes a full barrier), a `SeqCst` fence
/// otherwise.
pub(crate) fn heavy() {
    #[cfg(all(target_os = "linux", not(loom)))]
    if asymmetric() {
        use rustix::thread::{MembarrierCommand, membarrier};
        if membarrier(MembarrierCommand::PrivateExpedited).is_ok() {
            return;
        }
        // Registered, yet refused: nothing in the kernel's documentation
        // allows it, and the light side gave no ordering. A broken
        // invariant: stop rather than race.
        std::process::abort();
    }
    fence(Ordering::SeqCst);
}
