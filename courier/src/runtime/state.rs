//! Per-locality state: values a program asks every locality to make at
//! start-up ([`Config::state`](crate::Config::state)) and its actions read
//! ([`Runtime::state`], [`with_state`]). Unlike a `static`, each locality has
//! its own, also when localities are threads of one process
//! (`TransportKind::Inproc`).

use super::Runtime;
use super::handle::with_current_locality;

fn missing<T>() -> ! {
    panic!(
        "this locality has no state of type `{}`: add it with Config::state",
        std::any::type_name::<T>()
    )
}

impl Runtime {
    /// This locality's state of type `T`, made at start-up by the function
    /// given to [`Config::state`](crate::Config::state).
    ///
    /// # Panics
    ///
    /// If the configuration has no state of type `T`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use courier::{Config, TransportKind};
    ///
    /// /// How many hits this locality took.
    /// struct Hits(AtomicU64);
    ///
    /// #[courier::action]
    /// fn hit() {
    ///     courier::with_state(|taken: &Hits| taken.0.fetch_add(1, Ordering::Relaxed));
    /// }
    ///
    /// #[courier::action]
    /// fn hits() -> u64 {
    ///     courier::current().state::<Hits>().0.load(Ordering::Relaxed)
    /// }
    ///
    /// let config = Config::new()
    ///     .localities(2)
    ///     .transport(TransportKind::Inproc)
    ///     .state(|_, _| Hits(AtomicU64::new(0)));
    /// let total = courier::launch(config, |rt| async move {
    ///     for _ in 0..10 {
    ///         rt.post(rt.locality(1), hit, ())?;
    ///     }
    ///     rt.quiesce().await?;
    ///     Ok(rt.call(rt.locality(1), hits, ()).await? + rt.state::<Hits>().0.load(Ordering::Relaxed))
    /// })
    /// .unwrap();
    /// assert_eq!(total, 10);
    /// ```
    #[inline]
    pub fn state<T: 'static>(&self) -> &T {
        self.try_state().unwrap_or_else(|| missing::<T>())
    }

    /// This locality's state of type `T`, if the configuration has one.
    #[inline]
    pub fn try_state<T: 'static>(&self) -> Option<&T> {
        self.inner().states.get()
    }
}

/// Runs `f` with the state of type `T` of the locality this thread works
/// for: the cheap way for an action to reach its locality's state (no
/// runtime handle is cloned).
///
/// # Panics
///
/// Outside a Courier worker thread, or if the configuration has no state
/// of type `T`.
#[inline]
pub fn with_state<T: 'static, R>(f: impl FnOnce(&T) -> R) -> R {
    with_current_locality(|l| match l {
        Some(l) => f(l.states.get().unwrap_or_else(|| missing::<T>())),
        None => panic!("courier::with_state called outside a Courier worker thread"),
    })
}
