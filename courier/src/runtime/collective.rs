//! Collectives: [`Runtime::barrier`], [`Runtime::all_gather`],
//! [`Runtime::all_reduce`], and [`Runtime::quiesce`].
//!
//! A gather-based collective numbers itself on each locality (its
//! *epoch*): every locality makes the same collectives in the same order,
//! as in MPI, so the n-th collective of one locality meets the n-th of the
//! others. Each sends its value to the root in a control message; once the
//! root holds every value of an epoch it sends them all to every locality,
//! which finishes the collective on its own (a reduction folds the values
//! in rank order, so every locality gets the same result). Control
//! messages are never coalesced nor counted as parcels, so collectives
//! neither wait in buffers nor show in the traffic counters.
//!
//! Quiescence is not a collective: any locality may ask the root, which
//! runs waves of activity reports (as termination detection does, see
//! `termination.rs`) until two identical waves show every parcel sent so
//! far received and every piece of work it started (runs of calls, calls
//! that waited) finished; then it answers every request made before the
//! waves began.

use std::sync::atomic::Ordering;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Runtime;
use super::gather::{Wait, Waiting};
use super::locality::{Locality, report};
use super::termination::{parcels_quiet, run_waves};
use crate::aggregate::Reason;
use crate::ids::LocalityId;
use crate::parcel::{CallError, Control, Failure};

impl Locality {
    /// At the root: locality `from` gave its value for gather `epoch`.
    fn gather_value(&self, from: LocalityId, epoch: u64, value: Vec<u8>) {
        let collectives = &self.collectives;
        let mut state = collectives.state.lock();
        let count = self.count as usize;
        let values = state
            .gathering
            .entry(epoch)
            .or_insert_with(|| vec![None; count]);
        match values.get_mut(from.index()) {
            Some(place @ None) => *place = Some(value),
            // A second value from the same locality, or a stranger: ignored.
            _ => return,
        }
        if values.iter().any(Option::is_none) {
            return;
        }
        let values: Vec<Vec<u8>> = state
            .gathering
            .remove(&epoch)
            .unwrap_or_default()
            .into_iter()
            .flatten()
            .collect();
        drop(state);
        for peer in (0..self.count).map(LocalityId::new) {
            if peer != self.here {
                let values = values.clone();
                self.send_control(peer, &Control::Gathered { epoch, values });
            }
        }
        collectives.gathered(epoch, values);
    }

    /// At the root: locality `from` asks to be told (as its request `id`)
    /// when the job is quiet.
    fn request_quiet(&self, from: LocalityId, id: u64) {
        let mut state = self.collectives.state.lock();
        state.requests.push((from, id));
        if state.waves_running {
            return;
        }
        state.waves_running = true;
        drop(state);
        let locality = self.shared();
        let thread =
            std::thread::Builder::new().name(format!("courier-{}-quiesce", self.here.get()));
        let started = crate::sched::spawn_unbound(thread, move || locality.answer_quiet_requests());
        if let Err(e) = started {
            report!(error, self.here, "cannot start the quiescence thread: {e}");
            self.collectives
                .fail(&format!("cannot start the quiescence thread: {e}"));
        }
    }

    /// At the root, on a thread of its own: runs waves until the job is
    /// quiet, answers the requests made before they began, and goes on
    /// while requests keep coming.
    fn answer_quiet_requests(&self) {
        loop {
            let requests = {
                let mut state = self.collectives.state.lock();
                if state.requests.is_empty() {
                    state.waves_running = false;
                    return;
                }
                std::mem::take(&mut state.requests)
            };
            if !run_waves(self, parcels_quiet) {
                // A locality was lost: collectives fail through that.
                self.collectives.state.lock().waves_running = false;
                return;
            }
            for (from, id) in requests {
                if from == self.here {
                    self.collectives.quiet(id);
                } else {
                    self.send_control(from, &Control::QuiesceDone { id });
                }
            }
        }
    }

    /// Acts on a collective's control message from `source`; returns it
    /// back if it is not one.
    pub(crate) fn handle_collective(
        &self,
        source: LocalityId,
        control: Control,
    ) -> Option<Control> {
        match control {
            Control::Gather { epoch, value } if self.here == LocalityId::ROOT => {
                self.gather_value(source, epoch, value)
            }
            Control::Gathered { epoch, values } if source == LocalityId::ROOT => {
                self.collectives.gathered(epoch, values)
            }
            Control::QuiesceRequest { id } if self.here == LocalityId::ROOT => {
                self.request_quiet(source, id)
            }
            Control::QuiesceDone { id } if source == LocalityId::ROOT => self.collectives.quiet(id),
            Control::Gather { .. }
            | Control::Gathered { .. }
            | Control::QuiesceRequest { .. }
            | Control::QuiesceDone { .. } => {
                report!(
                    warn,
                    self.here,
                    "ignored a collective message from {source} that only the root may send or receive"
                );
            }
            other => return Some(other),
        }
        None
    }
}

/// A collective failed: a locality was lost, or a value did not (de)code.
fn collective_error(name: &'static str, at: LocalityId, failure: Failure) -> CallError {
    CallError::new(name, at, failure)
}

impl Runtime {
    /// Gathers `value` from every locality: every locality gets every
    /// locality's value, in rank order.
    ///
    /// # Collective
    ///
    /// Every locality must call it, in the same order as its other
    /// collectives ([`barrier`](Self::barrier), [`all_reduce`](Self::all_reduce),
    /// [`all_gather`](Self::all_gather)). Parcels this locality sent before
    /// are flushed first (not waited for: see [`quiesce`](Self::quiesce)).
    ///
    /// # Errors
    ///
    /// A [`CallError`] when a locality is lost, or a value does not encode
    /// or decode.
    #[doc(alias = "collective")]
    pub async fn all_gather<T: Serialize + DeserializeOwned>(
        &self,
        value: &T,
    ) -> Result<Vec<T>, CallError> {
        const NAME: &str = "courier::all_gather";
        let l = self.inner();
        let encoded = postcard::to_allocvec(value)
            .map_err(|e| collective_error(NAME, l.here, Failure::EncodeArgs(e.to_string())))?;
        let epoch = l.collectives.next_epoch.fetch_add(1, Ordering::Relaxed);
        l.aggregator.flush_all(&**l, Reason::Shutdown);
        if l.here == LocalityId::ROOT {
            l.gather_value(l.here, epoch, encoded);
        } else {
            l.send_control(
                LocalityId::ROOT,
                &Control::Gather {
                    epoch,
                    value: encoded,
                },
            );
        }
        let waiting = Waiting {
            collectives: &l.collectives,
            wait: Wait::Gathered(epoch),
        };
        let values = waiting.await.map_err(|reason| {
            collective_error(NAME, LocalityId::ROOT, Failure::PeerLost(reason))
        })?;
        values
            .iter()
            .enumerate()
            .map(|(rank, bytes)| {
                let at = LocalityId::new(rank as u32);
                crate::parcel::decode(bytes).map_err(|e| {
                    collective_error(
                        NAME,
                        at,
                        Failure::DecodeResult(format!(
                            "{e} (did every locality give a value of the same type?)"
                        )),
                    )
                })
            })
            .collect()
    }

    /// Waits until every locality has called `barrier` (as many times).
    ///
    /// # Collective
    ///
    /// Every locality must call it, in the same order as its other
    /// collectives. Parcels sent before are flushed but not waited for;
    /// [`quiesce`](Self::quiesce) waits for them.
    ///
    /// # Errors
    ///
    /// A [`CallError`] when a locality is lost.
    #[doc(alias = "collective")]
    pub async fn barrier(&self) -> Result<(), CallError> {
        self.all_gather(&()).await.map(drop)
    }

    /// Combines every locality's `value` with `op`, in rank order: every
    /// locality gets the same result.
    ///
    /// # Collective
    ///
    /// Every locality must call it, in the same order as its other
    /// collectives, with the same `op`.
    ///
    /// # Errors
    ///
    /// As [`all_gather`](Self::all_gather).
    ///
    /// # Examples
    ///
    /// ```
    /// use courier::{Config, TransportKind};
    ///
    /// // Every locality runs the main function (SPMD).
    /// let sum = courier::launch_spmd(Config::new().localities(3).transport(TransportKind::Inproc), |rt| async move {
    ///     let mine = u64::from(rt.here().get()) + 1;
    ///     Ok(rt.all_reduce(mine, |a, b| a + b).await?)
    /// })
    /// .unwrap();
    /// assert_eq!(sum, 1 + 2 + 3);
    /// ```
    #[doc(alias = "collective")]
    pub async fn all_reduce<T: Serialize + DeserializeOwned>(
        &self,
        value: T,
        op: impl Fn(T, T) -> T,
    ) -> Result<T, CallError> {
        let values = self.all_gather(&value).await?;
        drop(value);
        Ok(values
            .into_iter()
            .reduce(op)
            .expect("a job has at least one locality"))
    }

    /// Waits until every parcel sent so far, by any locality, has been
    /// received and run, and the job is quiet: no parcel in flight, in a
    /// buffer, or running (the termination check of the end of a job, on
    /// demand). An action's work includes what it awaits; tasks it spawns
    /// with [`spawn`](Self::spawn) and does not await are not waited for.
    ///
    /// Any locality may call it at any time. It covers what was sent
    /// before it was called: a locality still sending may make the job
    /// quiet for a moment and send more afterwards. An SPMD program that
    /// reads its results afterwards therefore passes a
    /// [`barrier`](Self::barrier) first (every locality is done sending)
    /// and then calls it on every locality, or calls it and then passes a
    /// barrier (the last locality's call covers everyone's sends).
    ///
    /// # Errors
    ///
    /// A [`CallError`] when a locality is lost.
    pub async fn quiesce(&self) -> Result<(), CallError> {
        let l = self.inner();
        let id = l.collectives.next_request.fetch_add(1, Ordering::Relaxed);
        l.aggregator.flush_all(&**l, Reason::Shutdown);
        if l.here == LocalityId::ROOT {
            l.request_quiet(l.here, id);
        } else {
            l.send_control(LocalityId::ROOT, &Control::QuiesceRequest { id });
        }
        let waiting = Waiting {
            collectives: &l.collectives,
            wait: Wait::Quiet(id),
        };
        waiting.await.map(drop).map_err(|reason| {
            collective_error(
                "courier::quiesce",
                LocalityId::ROOT,
                Failure::PeerLost(reason),
            )
        })
    }
}
