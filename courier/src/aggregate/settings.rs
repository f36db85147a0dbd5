//! The coalescing setting of every action towards every destination: the
//! action's default and the destinations set apart from it.
//!
//! Buffers copy their setting when they are made and whenever it changes,
//! so a parcel never reads this table; only making a buffer, changing a
//! setting and the counters do.

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::RwLock;
use rustc_hash::FxHashMap;

use super::policy::Coalescing;
use crate::ids::LocalityId;

#[derive(Debug)]
struct ActionSettings {
    /// Whether any setting of this action routes through a 2D grid: the one
    /// load a call pays to find its first hop.
    routed: AtomicBool,
    table: RwLock<Table>,
}

#[derive(Debug)]
struct Table {
    default: Coalescing,
    per_destination: FxHashMap<LocalityId, Coalescing>,
}

/// The settings of every action, by registry slot.
#[derive(Debug)]
pub(crate) struct Settings {
    actions: Box<[ActionSettings]>,
}

impl Settings {
    /// Settings with one default per action.
    pub(crate) fn new(defaults: impl IntoIterator<Item = Coalescing>) -> Self {
        let actions = defaults
            .into_iter()
            .map(|default| ActionSettings {
                routed: AtomicBool::new(default.dimensions() > 1),
                table: RwLock::new(Table {
                    default,
                    per_destination: FxHashMap::default(),
                }),
            })
            .collect();
        Settings { actions }
    }

    /// The setting of the action in `slot` towards `dest`.
    pub(crate) fn get(&self, slot: usize, dest: LocalityId) -> Coalescing {
        let table = self.actions[slot].table.read();
        table
            .per_destination
            .get(&dest)
            .copied()
            .unwrap_or(table.default)
    }

    /// The setting of the action in `slot` for destinations without one of
    /// their own.
    pub(crate) fn default(&self, slot: usize) -> Coalescing {
        self.actions[slot].table.read().default
    }

    /// Sets the action in `slot` towards `dest`, or towards every
    /// destination (which forgets the destinations set apart).
    pub(crate) fn set(&self, slot: usize, dest: Option<LocalityId>, setting: Coalescing) {
        let action = &self.actions[slot];
        let mut table = action.table.write();
        match dest {
            Some(dest) => {
                table.per_destination.insert(dest, setting);
            }
            None => {
                table.default = setting;
                table.per_destination.clear();
            }
        }
        let routed = table.default.dimensions() > 1
            || table.per_destination.values().any(|c| c.dimensions() > 1);
        action.routed.store(routed, Ordering::Relaxed);
    }

    /// Whether any call of the action in `slot` may be routed.
    #[inline]
    pub(crate) fn routed(&self, slot: usize) -> bool {
        self.actions[slot].routed.load(Ordering::Relaxed)
    }
}
