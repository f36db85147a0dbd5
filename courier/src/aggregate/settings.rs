//! The coalescing setting of every action towards every destination: the
//! action's default and the destinations set apart from it.
//!
//! Buffers copy their setting when they are made and whenever it changes,
//! so a parcel never reads this table; only making a buffer, changing a
//! setting and the counters do.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use parking_lot::RwLock;
use rustc_hash::{FxHashMap, FxHashSet};

use super::policy::{AdaptivePolicy, Coalescing};
use crate::ids::LocalityId;

#[derive(Debug)]
struct ActionSettings {
    /// Whether any setting of this action routes through a 2D grid: the one
    /// load a call pays to find its first hop.
    routed: AtomicBool,
    table: RwLock<Table>,
    /// The bounds of the action's tuner if it is adaptive (its default
    /// then holds what the tuner set).
    adaptive: RwLock<Option<AdaptivePolicy>>,
    /// Whether `adaptive` holds bounds: one load for the send path, which
    /// asks for every burst of calls under off.
    is_adaptive: AtomicBool,
    /// `adaptive`'s `split` for the send path, which asks at each frame
    /// of awaited calls ([`SPLIT_MODEL`] for `None`).
    split: AtomicU32,
}

/// How an adaptive action's bursts of awaited calls are split into
/// parts (`AdaptivePolicy::split`, `Aggregator::split_parcels`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Split {
    /// Whole: the action is not adaptive, or its policy says `split=0`.
    Whole,
    /// In parts the model sizes.
    Model,
    /// In parts of this many calls.
    Parcels(u32),
}

/// `ActionSettings::split` for a policy's `None`.
const SPLIT_MODEL: u32 = u32::MAX;

/// `ActionSettings::split` for `policy`. Parts of `u32::MAX` calls are
/// never cut below the count in force: whole, not the model's marker.
fn split_of(policy: Option<AdaptivePolicy>) -> u32 {
    match policy.and_then(|p| p.split) {
        None => SPLIT_MODEL,
        Some(SPLIT_MODEL) => 0,
        Some(parcels) => parcels,
    }
}

#[derive(Debug)]
struct Table {
    default: Coalescing,
    per_destination: FxHashMap<LocalityId, Coalescing>,
    /// The destinations whose calls of the action let their responses
    /// wait: their tuners' phase is of calls awaited in great numbers
    /// together (`Tuner::responses_wait`; see `answer.rs`).
    responses_wait: FxHashSet<LocalityId>,
}

impl Table {
    /// Puts `setting` in force towards `dest`, or towards every
    /// destination (which forgets the destinations set apart).
    fn put(&mut self, dest: Option<LocalityId>, setting: Coalescing) {
        match dest {
            Some(dest) => {
                self.per_destination.insert(dest, setting);
            }
            None => {
                self.default = setting;
                self.per_destination.clear();
            }
        }
    }
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
            .map(|default| {
                let adaptive = match default {
                    Coalescing::Adaptive(bounds) => Some(bounds),
                    _ => None,
                };
                ActionSettings {
                    routed: AtomicBool::new(default.dimensions() > 1),
                    adaptive: RwLock::new(adaptive),
                    is_adaptive: AtomicBool::new(adaptive.is_some()),
                    split: AtomicU32::new(split_of(adaptive)),
                    table: RwLock::new(Table {
                        default: default.in_force(),
                        per_destination: FxHashMap::default(),
                        responses_wait: FxHashSet::default(),
                    }),
                }
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
    /// destination (which forgets the destinations set apart). An
    /// adaptive setting makes the action's tuner work (towards every
    /// destination, whatever `dest`) from its starting point; any other
    /// towards every destination stops it. The responses to the calls
    /// towards `dest` (or every destination) no longer wait.
    pub(crate) fn set(&self, slot: usize, dest: Option<LocalityId>, setting: Coalescing) {
        let action = &self.actions[slot];
        let mut adaptive = action.adaptive.write();
        match (setting, dest) {
            (Coalescing::Adaptive(bounds), _) => *adaptive = Some(bounds),
            (_, None) => *adaptive = None,
            (_, Some(_)) => {}
        }
        action.split.store(split_of(*adaptive), Ordering::Relaxed);
        action
            .is_adaptive
            .store(adaptive.is_some(), Ordering::Relaxed);
        drop(adaptive);
        self.change(slot, |table| {
            table.put(dest, setting.in_force());
            // The program's setting takes back the word the tuners gave.
            match dest {
                Some(dest) => {
                    table.responses_wait.remove(&dest);
                }
                None => table.responses_wait.clear(),
            }
        });
    }

    /// Puts what the action's tuner chose for `dest` in force towards it,
    /// and makes it the setting of the destinations without one (those
    /// its tuners have not decided for yet, and this locality itself,
    /// follow the latest decision: `Aggregator::follow_latest` puts it on
    /// their buffers); the action stays adaptive. Returns false, changing
    /// nothing, if the action is no longer adaptive (the program set
    /// another setting since the tuner judged).
    pub(crate) fn tune(&self, slot: usize, dest: LocalityId, setting: Coalescing) -> bool {
        if self.adaptive(slot).is_none() {
            return false;
        }
        let setting = setting.in_force();
        self.change(slot, |table| {
            table.per_destination.insert(dest, setting);
            table.default = setting;
        });
        true
    }

    /// Says whether the calls of the action in `slot` to `dest` let their
    /// responses wait for company at `dest` (its tuner's judgment of the
    /// calls' κ); returns whether that changed. A setting the program
    /// sets towards `dest` (or every destination) takes it back; while
    /// the action stays adaptive, its tuner says it again at its next
    /// epoch.
    pub(crate) fn set_responses_wait(&self, slot: usize, dest: LocalityId, wait: bool) -> bool {
        let mut table = self.actions[slot].table.write();
        if wait {
            table.responses_wait.insert(dest)
        } else {
            table.responses_wait.remove(&dest)
        }
    }

    /// Whether the calls of the action in `slot` to `dest` let their
    /// responses wait (see [`set_responses_wait`](Self::set_responses_wait)).
    pub(crate) fn responses_wait(&self, slot: usize, dest: LocalityId) -> bool {
        self.actions[slot]
            .table
            .read()
            .responses_wait
            .contains(&dest)
    }

    /// The destinations with a setting of their own for the action in
    /// `slot`: those its tuners decided for, or the program set apart.
    pub(crate) fn destinations_set_apart(&self, slot: usize) -> FxHashSet<LocalityId> {
        let table = self.actions[slot].table.read();
        table.per_destination.keys().copied().collect()
    }

    /// Gives `dest` an entry of its own for the action in `slot`, holding
    /// `setting`: the setting of destinations without one, which later
    /// decisions for others move, no longer applies to it.
    pub(crate) fn pin(&self, slot: usize, dest: LocalityId, setting: Coalescing) {
        self.change(slot, |table| table.put(Some(dest), setting));
    }

    /// How the action in `slot` splits its bursts of awaited calls: two
    /// loads.
    pub(crate) fn split(&self, slot: usize) -> Split {
        let action = &self.actions[slot];
        if !action.is_adaptive.load(Ordering::Relaxed) {
            return Split::Whole;
        }
        match action.split.load(Ordering::Relaxed) {
            SPLIT_MODEL => Split::Model,
            0 => Split::Whole,
            parcels => Split::Parcels(parcels),
        }
    }

    /// The bounds of the tuner of the action in `slot`, if it is adaptive.
    pub(crate) fn adaptive(&self, slot: usize) -> Option<AdaptivePolicy> {
        let action = &self.actions[slot];
        if !action.is_adaptive.load(Ordering::Relaxed) {
            return None;
        }
        *action.adaptive.read()
    }

    /// The number of actions.
    pub(crate) fn len(&self) -> usize {
        self.actions.len()
    }

    /// Changes the table of the action in `slot` by `change`, and whether
    /// its calls may be routed.
    fn change(&self, slot: usize, change: impl FnOnce(&mut Table)) {
        let action = &self.actions[slot];
        let mut table = action.table.write();
        change(&mut table);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setting_the_program_sets_takes_back_the_responses_wait() {
        let (one, two) = (LocalityId::new(1), LocalityId::new(2));
        let settings = Settings::new([Coalescing::Adaptive(AdaptivePolicy::DEFAULT)]);
        assert!(!settings.responses_wait(0, one));
        assert!(settings.set_responses_wait(0, one, true));
        assert!(settings.set_responses_wait(0, two, true));
        assert!(!settings.set_responses_wait(0, two, true), "no change");
        // Pinned (the tuner's first traffic): kept.
        settings.pin(0, one, Coalescing::ON);
        assert!(settings.responses_wait(0, one));
        settings.set(0, Some(one), Coalescing::Off);
        assert!(!settings.responses_wait(0, one) && settings.responses_wait(0, two));
        settings.set(0, None, Coalescing::Adaptive(AdaptivePolicy::DEFAULT));
        assert!(!settings.responses_wait(0, two), "every destination's");
    }

    #[test]
    fn an_adaptive_action_splits_its_bursts_as_its_policy_says() {
        let adaptive = |split| {
            Coalescing::Adaptive(AdaptivePolicy {
                split,
                ..AdaptivePolicy::DEFAULT
            })
        };
        let settings = Settings::new([adaptive(None), Coalescing::ON]);
        assert_eq!(settings.split(0), Split::Model);
        assert_eq!(settings.split(1), Split::Whole, "not adaptive");
        settings.set(0, None, adaptive(Some(100)));
        assert_eq!(settings.split(0), Split::Parcels(100));
        settings.set(0, None, adaptive(Some(0)));
        assert_eq!(settings.split(0), Split::Whole);
        // Parts too large to cut anything, not the model's.
        settings.set(0, None, adaptive(Some(u32::MAX)));
        assert_eq!(settings.split(0), Split::Whole);
        settings.set(1, None, adaptive(None));
        assert_eq!(settings.split(1), Split::Model);
        // Another setting towards every destination ends the tuning.
        settings.set(1, None, Coalescing::ON);
        assert_eq!(settings.split(1), Split::Whole);
    }
}
