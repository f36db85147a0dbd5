//! The names of things every layer talks about: which locality
//! ([`LocalityId`]) and which action ([`ActionId`]). Leaf types: this room
//! imports nothing from the crate.

mod action;
mod locality;

pub use action::ActionId;
pub(crate) use action::fnv1a;
pub use locality::LocalityId;
