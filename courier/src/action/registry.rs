//! The table of every action in the binary, built once from the entries the
//! `#[courier::action]` macro submits.

use std::any::type_name;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;

use rustc_hash::FxHashMap;

use super::Action;
use super::id::{ActionId, fnv1a};
use crate::suggest::edit_distance;

/// The future of a type-erased action: the encoded output.
pub(crate) type ErasedOutput =
    Pin<Box<dyn Future<Output = Result<Vec<u8>, postcard::Error>> + Send>>;

type ErasedHandler = fn(&[u8]) -> Result<ErasedOutput, postcard::Error>;

/// One registered action, type-erased. Created by the `#[courier::action]`
/// macro through [`ActionEntry::of`]; not meant to be used directly.
#[doc(hidden)]
pub struct ActionEntry {
    name: &'static str,
    id: ActionId,
    args_type: fn() -> &'static str,
    output_type: fn() -> &'static str,
    handler: ErasedHandler,
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
            handler: erased_handler::<A>,
            coalescing: A::COALESCING,
        }
    }

    /// The action's full path.
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    /// Decodes `args` and starts the action; the future yields the encoded output.
    /// Whether the action is marked `#[courier::action(coalescing)]`.
    pub(crate) fn coalescing(&self) -> bool {
        self.coalescing
    }

    pub(crate) fn start(&self, args: &[u8]) -> Result<ErasedOutput, postcard::Error> {
        (self.handler)(args)
    }
}

fn erased_handler<A: Action>(args: &[u8]) -> Result<ErasedOutput, postcard::Error> {
    let args: A::Args = postcard::from_bytes(args)?;
    let run = A::default().invoke(args);
    Ok(Box::pin(async move {
        let output = run.await;
        postcard::to_allocvec(&output)
    }))
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

    /// The action with this id, if this binary has it.
    pub(crate) fn get(&self, id: ActionId) -> Option<&'static ActionEntry> {
        self.by_id.get(&id).map(|(_, e)| *e)
    }

    /// The slot of the action with this id.
    pub(crate) fn slot(&self, id: ActionId) -> Option<usize> {
        self.by_id.get(&id).map(|(slot, _)| *slot)
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
