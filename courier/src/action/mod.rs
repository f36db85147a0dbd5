//! Actions: functions registered on every locality and invoked remotely.
//!
//! An action is declared once with [`#[courier::action]`](crate::action) and
//! becomes a unit struct implementing [`Action`]. Its [`ActionId`] is a hash
//! of its full path, so every process of the same binary agrees on it without
//! talking; connecting localities compare a fingerprint of the whole registry
//! and refuse to talk when they were built from different code.

mod execute;

mod registry;

use crate::ids::ActionId;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};

use serde::Serialize;
use serde::de::DeserializeOwned;

pub(crate) use execute::{CallSite, EncodeOutput};

pub use registry::ActionEntry;
pub(crate) use registry::{action_slot, registry};

/// A function that can run on any locality.
///
/// Implemented by [`#[courier::action]`](crate::action); implementing it by
/// hand also works but the action must then be registered with
/// `inventory::submit!` as the macro does.
///
/// `Args` is the tuple of the function's parameters (`()` for none, `(T,)`
/// for one). Arguments and results travel as [`postcard`] bytes.
pub trait Action: Copy + Default + Send + Sync + 'static {
    /// The tuple of the parameters.
    type Args: Serialize + DeserializeOwned + Send + 'static;
    /// The return type.
    type Output: Serialize + DeserializeOwned + Send + 'static;
    /// The full path of the function (`crate::module::name`): unique in the
    /// binary and the same in every process running it.
    const NAME: &'static str;
    /// The stable id, derived from [`NAME`](Self::NAME).
    const ID: ActionId = ActionId::of_name(Self::NAME);
    /// Whether the action's parcels are coalesced with the configured
    /// default ([`Config::coalescing`](crate::Config::coalescing)), as every
    /// action is unless marked `#[courier::action(coalescing = false)]`
    /// (HPX coalesces only actions marked
    /// `HPX_ACTION_USES_MESSAGE_COALESCING`; Courier's buffers leave as soon
    /// as their worker runs out of work, so coalescing costs a lone call
    /// nothing and is the default). Any action's coalescing can also be
    /// changed while the program runs with
    /// [`Runtime::set_coalescing`](crate::Runtime::set_coalescing).
    const COALESCING: bool = true;

    /// The function itself when it is synchronous: received calls run it
    /// directly, without a future. Set by the macro for a non-`async` fn;
    /// `None` makes every call go through [`invoke`](Self::invoke).
    const SYNC: Option<fn(Self::Args) -> Self::Output> = None;

    /// Runs the function here, on the current locality.
    fn invoke(self, args: Self::Args) -> impl Future<Output = Self::Output> + Send + 'static;

    /// Where the macro caches the action's registry slot, so that sending a
    /// parcel does not look the action up by id. Not part of the API.
    #[doc(hidden)]
    fn __slot_cache() -> Option<&'static SlotCache> {
        None
    }
}

/// The registry slot of an action, looked up once. Used by the
/// `#[courier::action]` macro; not part of the API.
#[doc(hidden)]
#[derive(Debug)]
pub struct SlotCache(AtomicU32);

impl SlotCache {
    const UNKNOWN: u32 = u32::MAX;

    /// An empty cache.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        SlotCache(AtomicU32::new(Self::UNKNOWN))
    }
}

/// The registry slot of action `A`, if it is registered.
#[inline]
pub(crate) fn slot_of<A: Action>() -> Option<usize> {
    let Some(cache) = A::__slot_cache() else {
        return registry().slot(A::ID);
    };
    match cache.0.load(Ordering::Relaxed) {
        SlotCache::UNKNOWN => {
            let slot = registry().slot(A::ID)?;
            cache.0.store(slot as u32, Ordering::Relaxed);
            Some(slot)
        }
        slot => Some(slot as usize),
    }
}
