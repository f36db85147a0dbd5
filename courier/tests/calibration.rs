//! The probe frames of the α-β calibration of sends (the start-up
//! probe times sending them): what a receiver does with one, and with a
//! malformed one.

mod common;

use common::value;
use courier::__private::{probe_frame, receive_frame};
use courier::LocalityId;

#[test]
fn a_probe_frame_costs_the_receiver_nothing_and_a_bad_one_is_refused() {
    courier::launch(common::inproc(2), |rt| async move {
        let peer = LocalityId::new(1);
        let counted = [
            "/parcels{locality#0/total}/count/received",
            "/messages{locality#0/total}/count/received",
            "/serialize{locality#0/total}/count/received",
        ];
        for padding in [0, 1, 64 << 10] {
            receive_frame(&rt, peer, &probe_frame(peer, padding))
                .map_err(|e| format!("a probe of {padding} bytes was refused: {e}"))?;
        }
        let values = rt.counters(counted)?.evaluate(false).await?;
        for name in counted {
            assert_eq!(value(&values, name), 0.0, "{name}");
        }
        // Padding cut short: the length says more than the frame holds.
        let frame = probe_frame(peer, 100);
        let error = receive_frame(&rt, peer, &frame[..frame.len() - 1]).unwrap_err();
        assert!(error.contains("control"), "{error}");
        // A length of 2^35 - 1, with nothing after it.
        let mut huge = probe_frame(peer, 0);
        huge.pop();
        huge.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x7f]);
        let error = receive_frame(&rt, peer, &huge).unwrap_err();
        assert!(error.contains("control"), "{error}");
        Ok(())
    })
    .unwrap();
}
