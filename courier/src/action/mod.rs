//! Actions: functions registered on every locality and invoked remotely.
//!
//! An action is declared once with [`#[courier::action]`](crate::action) and
//! becomes a unit struct implementing [`Action`]. Its [`ActionId`] is a hash
//! of its full path, so every process of the same binary agrees on it without
//! talking; connecting localities compare a fingerprint of the whole registry
//! and refuse to talk when they were built from different code.

mod id;
mod registry;

use std::future::Future;

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use id::ActionId;
pub use registry::ActionEntry;
pub(crate) use registry::{ErasedOutput, action_slot, registry};

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
    /// default ([`Config::coalescing`](crate::Config::coalescing)): set by
    /// `#[courier::action(coalescing)]`, the counterpart of HPX's
    /// `HPX_ACTION_USES_MESSAGE_COALESCING`. Any action's coalescing can
    /// also be changed while the program runs with
    /// [`Runtime::set_coalescing`](crate::Runtime::set_coalescing).
    const COALESCING: bool = false;

    /// Runs the function here, on the current locality.
    fn invoke(self, args: Self::Args) -> impl Future<Output = Self::Output> + Send + 'static;
}
