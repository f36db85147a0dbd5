//! The in-process transport: every locality is a thread pool of this process
//! and a frame is moved (not copied) into the receiver's inbox.
//!
//! Frames are still fully encoded and decoded, so this transport exercises
//! the same code as a network one, minus the sockets.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};

use super::{ProtocolError, SendError, Sink, Transport, check_frame_len};
use crate::clock::clock;
use crate::ids::LocalityId;
use crate::parcel::FRAME_HEADROOM;
use crate::sched::BlockOutcome;

enum Delivery {
    Frame(LocalityId, Vec<u8>),
    Lost(LocalityId, String),
}

#[derive(Default)]
struct InboxState {
    queue: VecDeque<Delivery>,
    woken: bool,
    /// Peers this locality can no longer talk to.
    lost: Vec<LocalityId>,
}

#[derive(Default)]
struct Inbox {
    state: Mutex<InboxState>,
    ready: Condvar,
}

/// The inboxes of every locality of one in-process job.
#[derive(Default)]
pub(crate) struct Fabric {
    inboxes: Vec<Inbox>,
}

impl Fabric {
    /// A fabric for `n` localities.
    pub(crate) fn new(n: u32) -> Arc<Self> {
        Arc::new(Fabric {
            inboxes: (0..n).map(|_| Inbox::default()).collect(),
        })
    }

    fn push(&self, to: LocalityId, delivery: Delivery) {
        let inbox = &self.inboxes[to.index()];
        inbox.state.lock().queue.push_back(delivery);
        inbox.ready.notify_one();
    }
}

/// One locality's end of a [`Fabric`].
pub(crate) struct Inproc {
    here: LocalityId,
    fabric: Arc<Fabric>,
    max_frame_bytes: usize,
    /// Held while taking frames out of the inbox and delivering them: one
    /// thread at a time delivers (a worker, or the monitor thread), so
    /// that frames reach the sink in the order they were sent.
    delivering: Mutex<()>,
}

impl std::fmt::Debug for Inproc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inproc")
            .field("here", &self.here)
            .finish_non_exhaustive()
    }
}

impl Inproc {
    /// Locality `here`'s end of `fabric`.
    pub(crate) fn new(here: LocalityId, fabric: Arc<Fabric>, max_frame_bytes: usize) -> Self {
        Inproc {
            here,
            fabric,
            max_frame_bytes,
            delivering: Mutex::new(()),
        }
    }

    fn inbox(&self) -> &Inbox {
        &self.fabric.inboxes[self.here.index()]
    }

    /// Breaks the link between here and `peer` in both directions.
    fn break_link(&self, peer: LocalityId, reason: &str) {
        self.inbox().state.lock().lost.push(peer);
        self.fabric.inboxes[peer.index()]
            .state
            .lock()
            .lost
            .push(self.here);
        self.fabric
            .push(self.here, Delivery::Lost(peer, reason.to_owned()));
        self.fabric.push(
            peer,
            Delivery::Lost(
                self.here,
                format!("{} dropped the connection: {reason}", self.here),
            ),
        );
    }

    fn deliver(&self, sink: &dyn Sink, batch: VecDeque<Delivery>) -> bool {
        let did = !batch.is_empty();
        for delivery in batch {
            match delivery {
                Delivery::Frame(source, frame) => {
                    if self.inbox().state.lock().lost.contains(&source) {
                        continue;
                    }
                    let checked = check_frame_len(&frame, self.max_frame_bytes)
                        .map_err(|error| ProtocolError::TooLarge {
                            from: source,
                            error,
                        })
                        .and_then(|()| {
                            sink.frame(source, Bytes::from(frame).slice(FRAME_HEADROOM..))
                        });
                    if let Err(error) = checked {
                        self.break_link(source, &error.to_string());
                    }
                }
                Delivery::Lost(peer, reason) => sink.peer_lost(peer, reason),
            }
        }
        did
    }
}

impl Transport for Inproc {
    fn send(&self, dest: LocalityId, frame: Vec<u8>) -> Result<(), SendError> {
        if dest.index() >= self.fabric.inboxes.len() {
            return Err(SendError::NoSuchPeer(dest));
        }
        if self.inbox().state.lock().lost.contains(&dest) {
            return Err(SendError::PeerLost(format!(
                "{dest} is no longer reachable"
            )));
        }
        self.fabric.push(dest, Delivery::Frame(self.here, frame));
        Ok(())
    }

    fn poll(&self, sink: &dyn Sink) -> bool {
        // Whoever delivers now delivers what is queued, in order.
        let Some(_delivering) = self.delivering.try_lock() else {
            return false;
        };
        let batch = std::mem::take(&mut self.inbox().state.lock().queue);
        self.deliver(sink, batch)
    }

    fn block(&self, sink: &dyn Sink, timeout: Duration) -> BlockOutcome {
        let Some(_delivering) = self.delivering.try_lock() else {
            return BlockOutcome::Busy;
        };
        let batch = {
            let inbox = self.inbox();
            let mut state = inbox.state.lock();
            if state.queue.is_empty() && !state.woken {
                inbox.ready.wait_for(&mut state, timeout);
            }
            state.woken = false;
            std::mem::take(&mut state.queue)
        };
        let start = clock().raw();
        self.deliver(sink, batch);
        BlockOutcome::Blocked {
            work_ns: clock().delta_as_nanos(start, clock().raw()),
        }
    }

    fn wake(&self) {
        let inbox = self.inbox();
        inbox.state.lock().woken = true;
        inbox.ready.notify_all();
    }

    fn flush(&self, _sink: &dyn Sink, _timeout: Duration) -> bool {
        true
    }

    fn drop_peer(&self, peer: LocalityId, reason: &str) {
        let mut state = self.inbox().state.lock();
        if !state.lost.contains(&peer) {
            state.lost.push(peer);
            drop(state);
            self.fabric.inboxes[peer.index()]
                .state
                .lock()
                .lost
                .push(self.here);
            self.fabric.push(
                peer,
                Delivery::Lost(
                    self.here,
                    format!("{} dropped the connection: {reason}", self.here),
                ),
            );
        }
    }

    fn close(&self) {}
}

#[cfg(test)]
mod tests {
    use parking_lot::Mutex;

    use super::*;

    /// Records what a transport delivers.
    #[derive(Default)]
    struct Recorder {
        frames: Mutex<Vec<(LocalityId, Vec<u8>)>>,
        lost: Mutex<Vec<(LocalityId, String)>>,
    }

    impl Sink for Recorder {
        fn frame(&self, source: LocalityId, frame: Bytes) -> Result<(), ProtocolError> {
            self.frames.lock().push((source, frame.to_vec()));
            Ok(())
        }

        fn peer_lost(&self, peer: LocalityId, reason: String) {
            self.lost.lock().push((peer, reason));
        }
    }

    fn frame_of(body: &[u8]) -> Vec<u8> {
        let mut frame = vec![0; FRAME_HEADROOM];
        frame.extend_from_slice(body);
        frame
    }

    #[test]
    fn sends_are_checked_and_delivered_as_typed_errors() {
        let fabric = Fabric::new(2);
        let (zero, one) = (LocalityId::new(0), LocalityId::new(1));
        let a = Inproc::new(zero, Arc::clone(&fabric), 8);
        let b = Inproc::new(one, fabric, 8);
        assert_eq!(
            a.send(LocalityId::new(2), frame_of(b"x")),
            Err(SendError::NoSuchPeer(LocalityId::new(2)))
        );
        a.send(one, frame_of(b"hello")).unwrap();
        a.send(one, frame_of(b"too long!")).unwrap();
        let sink = Recorder::default();
        assert!(b.poll(&sink));
        assert_eq!(*sink.frames.lock(), [(zero, b"hello".to_vec())]);
        // The long frame broke the link: `a` learns it lost `b`, and `b`
        // delivers nothing more from `a`.
        let lost = Recorder::default();
        assert!(a.poll(&lost));
        let reason = &lost.lost.lock()[0];
        assert_eq!(reason.0, one);
        assert!(
            reason.1.contains("9 bytes, above the limit of 8"),
            "{}",
            reason.1
        );
        assert!(matches!(
            a.send(one, frame_of(b"more")),
            Err(SendError::PeerLost(_))
        ));
    }
}
