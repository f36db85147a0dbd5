//! The control protocol: the messages termination detection and shutdown
//! exchange (see `termination.rs` for the waves).

use super::locality::{Locality, report};
use crate::ids::LocalityId;
use crate::parcel::Control;

impl Locality {
    /// Acts on a control message from `source`.
    pub(crate) fn handle_control(&self, source: LocalityId, control: Control) {
        let Some(control) = self.handle_collective(source, control) else {
            return;
        };
        // Termination is the root's: only it asks and stops, only it is
        // answered. A member sending these forges them.
        let root = LocalityId::ROOT;
        let forged = match &control {
            Control::QuiescenceQuery { .. } | Control::Shutdown => source != root,
            Control::QuiescenceReport { .. } | Control::MainDone { .. } => self.here != root,
            _ => false,
        };
        if forged {
            report!(
                warn,
                self.here,
                "ignored a termination message from {source} that only the root may send or \
                 receive"
            );
            return;
        }
        match control {
            Control::QuiescenceQuery { wave } => {
                let counts = self.activity();
                self.send_control(source, &Control::QuiescenceReport { wave, counts });
            }
            Control::QuiescenceReport { wave, counts } => {
                self.control.lock().reports.insert((wave, source), counts);
                self.control_changed.notify_all();
            }
            Control::MainDone { error } => {
                self.control.lock().mains_done.push((source, error));
                self.control_changed.notify_all();
            }
            Control::Shutdown => {
                self.set_stopping();
                self.send_control(source, &Control::ShutdownAck);
                self.control.lock().shutdown_requested = true;
                self.control_changed.notify_all();
            }
            Control::ShutdownAck => {
                let mut control = self.control.lock();
                // Only an answer to the root's request counts: an early
                // one would make the root ignore that peer's real loss.
                if control.shutdown_sent && source != self.here && !control.acked.contains(&source)
                {
                    control.acked.push(source);
                    drop(control);
                    self.control_changed.notify_all();
                } else {
                    drop(control);
                    report!(
                        warn,
                        self.here,
                        "ignored a shutdown acknowledgement from {source} that nobody asked for"
                    );
                }
            }
            Control::Credit { bytes } => self.credit_returned(source, bytes),
            Control::Borrow { bytes } => self.lend(source, bytes),
            Control::Lent { bytes } => self.borrowed(source, bytes),
            Control::GiveBack { bytes } => {
                self.ledger
                    .take_back(source, usize::try_from(bytes).unwrap_or(usize::MAX));
            }
            Control::PostsFailed {
                origin,
                at,
                action,
                count,
                error,
            } => self.handle_posts_failed(source, origin, at, action, count, error),
            // Heard already: every frame counts (see `liveness`). A probe
            // was sent to be timed, not read (see `probe.rs`).
            Control::Heartbeat | Control::Probe { .. } => {}
            Control::Gather { .. }
            | Control::Gathered { .. }
            | Control::QuiesceRequest { .. }
            | Control::QuiesceDone { .. } => {
                unreachable!("collective messages are handled above")
            }
        }
    }
}
