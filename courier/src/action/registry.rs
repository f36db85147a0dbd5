//! The table of every action in the binary, built once from the entries the
//! `#[courier::action]` macro submits.

use std::any::type_name;
use std::fmt;
use std::sync::Arc;
use std::sync::OnceLock;

use rustc_hash::FxHashMap;

use super::Action;
use super::execute::{CallSite, run_calls};
use crate::ids::{ActionId, fnv1a};
use crate::parcel::{DecodeError, ParcelReader};
use crate::suggest::edit_distance;

/// [`run_calls`] for one action, type-erased.
type RunCalls = fn(&Arc<dyn CallSite>, usize, &mut ParcelReader<'_>) -> Result<(), DecodeError>;

/// One registered action, type-erased. Created by the `#[courier::action]`
/// macro through [`ActionEntry::of`]; not meant to be used directly.
#[doc(hidden)]
pub struct ActionEntry {
    name: &'static str,
    id: ActionId,
    args_type: fn() -> &'static str,
    output_type: fn() -> &'static str,
    run: RunCalls,
    coalescing: bool,
}

impl fmt::Debug for ActionEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActionEntry")
            .field("name", &self.name)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl ActionEntry {
    /// The entry for action `A`.
    pub const fn of<A: Action>() -> ActionEntry {
        ActionEntry {
            name: A::NAME,
            id: A::ID,
            args_type: type_name::<A::Args>,
            output_type: type_name::<A::Output>,
            run: run_calls::<A>,
            coalescing: A::COALESCING,
        }
    }

    /// The action's full path.
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    /// The action's id.
    pub(crate) fn id(&self) -> ActionId {
        self.id
    }

    /// Whether the action is coalesced by default (not marked
    /// `#[courier::action(coalescing = false)]`).
    pub(crate) fn coalescing(&self) -> bool {
        self.coalescing
    }

    /// Runs every call of a run of this action (registry slot `slot`).
    pub(crate) fn run_calls(
        &self,
        site: &Arc<dyn CallSite>,
        slot: usize,
        calls: &mut ParcelReader<'_>,
    ) -> Result<(), DecodeError> {
        (self.run)(site, slot, calls)
    }
}

inventory::collect!(ActionEntry);

/// Every action of the binary by id, and a fingerprint of the whole set.
/// Each action also has a *slot*: its index in name order, dense, for
/// per-action tables.
#[derive(Debug)]
pub(crate) struct Registry {
    by_id: FxHashMap<ActionId, (usize, &'static ActionEntry)>,
    by_slot: Vec<&'static ActionEntry>,
    fingerprint: u64,
}

impl Registry {
    fn build() -> Registry {
        let mut entries: Vec<&'static ActionEntry> = inventory::iter::<ActionEntry>().collect();
        entries.sort_by_key(|e| e.name);
        let mut by_id = FxHashMap::default();
        let by_slot = entries.clone();
        // The fingerprint covers names and signatures, so a changed argument
        // type is caught at connection time too.
        let mut fingerprint = fnv1a(ActionId::of_name("courier-registry-v1").to_bits(), &[]);
        for (slot, entry) in entries.into_iter().enumerate() {
            if let Some((_, other)) = by_id.insert(entry.id, (slot, entry)) {
                panic!(
                    "actions `{}` and `{}` hash to the same id {}; rename one of them",
                    other.name, entry.name, entry.id
                );
            }
            for part in [entry.name, (entry.args_type)(), (entry.output_type)()] {
                fingerprint = fnv1a(fingerprint, part.as_bytes());
                fingerprint = fnv1a(fingerprint, &[0]);
            }
        }
        Registry {
            by_id,
            by_slot,
            fingerprint,
        }
    }

    /// The slot of the action with this id.
    pub(crate) fn slot(&self, id: ActionId) -> Option<usize> {
        self.by_id.get(&id).map(|(slot, _)| *slot)
    }

    /// The slot and entry of the action with this id.
    pub(crate) fn lookup(&self, id: ActionId) -> Option<(usize, &'static ActionEntry)> {
        self.by_id.get(&id).copied()
    }

    /// Every action, in slot (name) order.
    pub(crate) fn entries(&self) -> &[&'static ActionEntry] {
        &self.by_slot
    }

    /// A hash of every action's name and signature. Localities that differ
    /// here run different code and must not talk.
    pub(crate) fn fingerprint(&self) -> u64 {
        self.fingerprint
    }
}

/// The registry of this binary, built on first use.
pub(crate) fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::build)
}

/// The registry slot of the action called `name`: its full path, or a
/// suffix after `::` that only one action has.
pub(crate) fn action_slot(name: &str) -> Result<usize, String> {
    let entries = registry().entries();
    if let Some(slot) = entries.iter().position(|e| e.name() == name) {
        return Ok(slot);
    }
    let suffix = format!("::{name}");
    let matches: Vec<usize> = (0..entries.len())
        .filter(|&i| entries[i].name().ends_with(&suffix))
        .collect();
    match matches[..] {
        [slot] => Ok(slot),
        [] => {
            let mut close: Vec<(usize, &str)> = entries
                .iter()
                .map(|e| (edit_distance(name, e.name()), e.name()))
                .collect();
            close.sort();
            let close: Vec<&str> = close.into_iter().take(3).map(|(_, n)| n).collect();
            Err(format!(
                "no action named `{name}`; closest: {}",
                close.join(", ")
            ))
        }
        _ => Err(format!(
            "`{name}` names {} actions; give the full path: {}",
            matches.len(),
            matches
                .iter()
                .map(|&i| entries[i].name())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}
