//! The control protocol: the messages termination detection and shutdown
//! exchange (see `termination.rs` for the waves).

use super::LocalityId;
use super::locality::Locality;
use crate::parcel::Control;

impl Locality {
    /// Acts on a control message from `source`.
    pub(crate) fn handle_control(&self, source: LocalityId, control: Control) {
        match control {
            Control::QuiescenceQuery { wave } => {
                let counts = self.activity();
                self.send_control(source, &Control::QuiescenceReport { wave, counts });
            }
            Control::QuiescenceReport { wave, counts } => {
                self.control.lock().reports.insert(source, (wave, counts));
                self.control_changed.notify_all();
            }
            Control::Shutdown => {
                self.set_stopping();
                self.send_control(source, &Control::ShutdownAck);
                self.control.lock().shutdown_requested = true;
                self.control_changed.notify_all();
            }
            Control::ShutdownAck => {
                self.control.lock().acked.push(source);
                self.control_changed.notify_all();
            }
        }
    }
}
