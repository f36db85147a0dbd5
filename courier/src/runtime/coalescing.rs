//! The [`Runtime`] methods that read and change coalescing while the
//! program runs.

use std::sync::Arc;

use super::Runtime;
use super::locality::Locality;
use crate::action::{Action, registry};
use crate::aggregate::Coalescing;
use crate::ids::ActionId;
use crate::ids::LocalityId;
use crate::parcel::CallError;

/// Why a coalescing setting was not applied.
///
/// # Examples
///
/// ```
/// use courier::{Coalescing, CoalescingError, Config, TransportKind};
///
/// #[courier::action]
/// fn ping() {}
///
/// courier::launch(Config::new().localities(2).transport(TransportKind::Inproc), |rt| async move {
///     let bad: Coalescing = Coalescing::Count(courier::CountPolicy {
///         num_parcels: 0,
///         ..courier::CountPolicy::DEFAULT
///     });
///     let err = rt.set_coalescing(ping, bad).unwrap_err();
///     assert!(matches!(err, CoalescingError::BadSetting { .. }), "{err}");
///     Ok(())
/// })
/// .unwrap();
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CoalescingError {
    /// The action is not in this binary's registry.
    #[error("action `{name}` is not registered (is it declared with #[courier::action]?)")]
    UnknownAction {
        /// The action's name.
        name: String,
    },
    /// The setting breaks one of its policy's rules.
    #[error("coalescing {setting}: {reason}")]
    BadSetting {
        /// The setting.
        setting: Coalescing,
        /// Which rule it breaks.
        reason: String,
    },
    /// The destination is not a locality of the job.
    #[error("{dest} does not exist: the job has {count} localities")]
    NoSuchLocality {
        /// The destination asked for.
        dest: LocalityId,
        /// How many localities the job has.
        count: u32,
    },
    /// A locality could not be reached to apply the setting there
    /// ([`Runtime::set_coalescing_everywhere`]).
    #[error(transparent)]
    Call(#[from] CallError),
    /// A locality refused the setting (it does not know the action).
    #[error("{locality} refused the setting: {reason}")]
    Refused {
        /// The locality that refused.
        locality: LocalityId,
        /// Why.
        reason: String,
    },
}

fn slot_of(id: ActionId, name: &str) -> Result<usize, CoalescingError> {
    registry()
        .slot(id)
        .ok_or_else(|| CoalescingError::UnknownAction { name: name.into() })
}

fn checked(setting: Coalescing) -> Result<Coalescing, CoalescingError> {
    setting
        .validate()
        .map(|()| setting)
        .map_err(|reason| CoalescingError::BadSetting { setting, reason })
}

impl Runtime {
    /// Sets how this locality coalesces the parcels of `action` (its calls,
    /// and the responses to calls of it it answers) towards every
    /// destination. The new setting governs the very next parcel: what the
    /// buffers held is sent first. Other localities keep theirs; see
    /// [`set_coalescing_everywhere`](Self::set_coalescing_everywhere).
    ///
    /// # Errors
    ///
    /// [`CoalescingError`] when the action is not registered or the
    /// setting is invalid (see [`Coalescing::validate`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use courier::{Coalescing, CountPolicy, Config, TransportKind};
    ///
    /// #[courier::action]
    /// fn add(a: u64, b: u64) -> u64 { a + b }
    ///
    /// let config = Config::new().localities(2).transport(TransportKind::Inproc);
    /// let sum = courier::launch(config, |rt| async move {
    ///     let policy = CountPolicy { num_parcels: 16, interval_us: 200, ..CountPolicy::DEFAULT };
    ///     rt.set_coalescing(add, Coalescing::Count(policy))?;
    ///     let calls: Vec<_> = (0..100).map(|i| rt.call(rt.locality(1), add, (i, 1))).collect();
    ///     let mut sum = 0;
    ///     for call in calls {
    ///         sum += call.await?;
    ///     }
    ///     Ok(sum)
    /// })
    /// .unwrap();
    /// assert_eq!(sum, 5050);
    /// ```
    pub fn set_coalescing<A: Action>(
        &self,
        action: A,
        setting: Coalescing,
    ) -> Result<(), CoalescingError> {
        let _ = action;
        let slot = slot_of(A::ID, A::NAME)?;
        put(self.inner(), slot, None, checked(setting)?);
        Ok(())
    }

    /// Like [`set_coalescing`](Self::set_coalescing), towards `dest` only.
    ///
    /// # Errors
    ///
    /// [`CoalescingError`] when the action is not registered, the setting
    /// is invalid, or `dest` is not a locality of the job.
    pub fn set_coalescing_to<A: Action>(
        &self,
        action: A,
        dest: LocalityId,
        setting: Coalescing,
    ) -> Result<(), CoalescingError> {
        let _ = action;
        let slot = slot_of(A::ID, A::NAME)?;
        if dest.get() >= self.num_localities() {
            return Err(CoalescingError::NoSuchLocality {
                dest,
                count: self.num_localities(),
            });
        }
        put(self.inner(), slot, Some(dest), checked(setting)?);
        Ok(())
    }

    /// Sets the coalescing of `action` on every locality of the job (each
    /// towards every destination), and returns once all have it.
    ///
    /// # Errors
    ///
    /// [`CoalescingError`] for an unregistered action or an invalid setting,
    /// and when a locality could not be reached or refused the setting.
    pub async fn set_coalescing_everywhere<A: Action>(
        &self,
        action: A,
        setting: Coalescing,
    ) -> Result<(), CoalescingError> {
        let _ = action;
        slot_of(A::ID, A::NAME)?;
        checked(setting)?;
        let calls: Vec<_> = self
            .localities()
            .map(|l| {
                (
                    l,
                    self.call(l, apply_coalescing, (A::ID.to_bits(), setting)),
                )
            })
            .collect();
        for (locality, call) in calls {
            call.await?
                .map_err(|reason| CoalescingError::Refused { locality, reason })?;
        }
        Ok(())
    }

    /// The coalescing of `action` on this locality towards `dest`: for an
    /// adaptive action, the count policy its tuner put in force.
    ///
    /// # Panics
    ///
    /// If `dest` is not a locality of the job, or `action` is not registered.
    pub fn coalescing<A: Action>(&self, action: A, dest: LocalityId) -> Coalescing {
        let _ = action;
        let slot = slot_of(A::ID, A::NAME).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            dest.get() < self.num_localities(),
            "{dest} does not exist: the job has {} localities",
            self.num_localities()
        );
        self.inner().aggregator.setting(slot, dest)
    }

    /// Sends every buffered parcel of this locality now.
    pub fn flush(&self) {
        let l = self.inner();
        l.aggregator
            .flush_all(&**l, crate::aggregate::Reason::Changed);
    }
}

/// Applies a coalescing setting on the locality it runs on: the remote half
/// of [`Runtime::set_coalescing_everywhere`].
#[crate::action]
fn apply_coalescing(action: u64, setting: Coalescing) -> Result<(), String> {
    let rt = super::current();
    let slot = registry()
        .slot(ActionId::from_bits(action))
        .ok_or_else(|| format!("no action with id {action:#x} here"))?;
    let setting = checked(setting).map_err(|e| e.to_string())?;
    put(rt.inner(), slot, None, setting);
    Ok(())
}

/// Puts `setting` in force for the action in `slot` towards `dest` (or
/// every destination) on locality `l`; an adaptive one turns the
/// locality's tuning loop on if it is not yet.
fn put(l: &Arc<Locality>, slot: usize, dest: Option<LocalityId>, setting: Coalescing) {
    l.aggregator.set(&**l, slot, dest, setting);
    if matches!(setting, Coalescing::Adaptive(_)) {
        l.epochs.start_if_adaptive(l);
    }
}
