//! [`States`]: the store of one locality's per-locality program states
//! (one value per type), and [`StateMaker`], how `Config::state` makes
//! them. Reading them is in `state.rs`.

use std::any::{Any, TypeId};
use std::sync::Arc;

use crate::ids::LocalityId;

type Make = dyn Fn(LocalityId, u32) -> Box<dyn Any + Send + Sync> + Send + Sync;

/// How to make one piece of per-locality state.
#[derive(Clone)]
pub(crate) struct StateMaker {
    type_id: TypeId,
    type_name: &'static str,
    make: Arc<Make>,
}

impl std::fmt::Debug for StateMaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.type_name)
    }
}

impl StateMaker {
    pub(crate) fn new<T: Send + Sync + 'static>(
        make: impl Fn(LocalityId, u32) -> T + Send + Sync + 'static,
    ) -> Self {
        StateMaker {
            type_id: TypeId::of::<T>(),
            type_name: std::any::type_name::<T>(),
            make: Arc::new(move |here, count| Box::new(make(here, count))),
        }
    }

    pub(crate) fn type_id(&self) -> TypeId {
        self.type_id
    }
}

/// The states of one locality, one per type.
#[derive(Default)]
pub(crate) struct States(Vec<(TypeId, Box<dyn Any + Send + Sync>)>);

impl std::fmt::Debug for States {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("States")
            .field("count", &self.0.len())
            .finish()
    }
}

impl States {
    /// Makes every state for locality `here` of `count`.
    pub(crate) fn make(makers: &[StateMaker], here: LocalityId, count: u32) -> Self {
        States(
            makers
                .iter()
                .map(|m| (m.type_id, (m.make)(here, count)))
                .collect(),
        )
    }

    /// The state of type `T`. A linear search: a program has a few.
    #[inline]
    pub(crate) fn get<T: 'static>(&self) -> Option<&T> {
        let id = TypeId::of::<T>();
        self.0
            .iter()
            .find(|(t, _)| *t == id)
            .and_then(|(_, state)| state.downcast_ref())
    }
}
