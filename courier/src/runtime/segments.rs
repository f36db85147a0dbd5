//! Segmented calls (seed 002): [`Runtime::call_segments`] splits a call's
//! segments into pipeline units that fit the target's credit and sends
//! each as a frame of its own, waiting for credit between them as any
//! send does; results land at fixed places as units come back (see
//! `parcel/segments.rs`).

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Runtime;
use super::send::seal_batch;
use crate::action::Action;
use crate::ids::LocalityId;
use crate::parcel::{
    Caller, Failure, Path, ReplyTo, Response, RunKind, SegmentOptions, SegmentOutput, SegmentSink,
    SegmentUnit, SegmentUnitRef, SegmentsFuture, split_units,
};

/// Input bytes of a unit without flow control.
const UNIT_BYTES_WITHOUT_CREDIT: usize = 256 << 10;

impl Runtime {
    /// Calls `action` on `dest` with `segments` as one segmented call and
    /// returns the future of every segment's output.
    ///
    /// Segments are the smallest unit the call may be split at: the
    /// runtime sends them in pipeline units of whole segments (a quarter
    /// of the credit window of input each, or
    /// [`SegmentOptions::unit_bytes`]); `dest` runs the handler once per
    /// unit as units arrive, overlapping transfer and work, and a call
    /// larger than every buffer of the target still goes through as
    /// credit comes back. The handler returns up to
    /// [`max_out`](SegmentOptions::max_out) items per segment
    /// ([`SegmentOutput`], a vector AM); each segment's items land at
    /// their fixed place at the origin however the units are ordered, and
    /// a unit's output travels packed or whole by the options' threshold.
    ///
    /// Like `post`, sending waits for credit when the destination's queue
    /// is full (see [`post`](Self::post)).
    ///
    /// # Examples
    ///
    /// ```
    /// use courier::{Config, SegmentOptions, SegmentOutput, SegmentUnit, TransportKind};
    ///
    /// /// Every divisor of each number, at most 4 per number.
    /// #[courier::action]
    /// fn divisors(unit: SegmentUnit<u32>) -> SegmentOutput<u32> {
    ///     let mut out = unit.output();
    ///     for (i, &n) in unit.segments().iter().enumerate() {
    ///         for d in (1..=n).filter(|d| n % d == 0).take(4) {
    ///             out.push(i, d).unwrap();
    ///         }
    ///     }
    ///     out
    /// }
    ///
    /// courier::launch(Config::new().localities(2).transport(TransportKind::Inproc), |rt| async move {
    ///     let numbers: Vec<u32> = (1..=1000).collect();
    ///     let options = SegmentOptions::new(4).unit_bytes(100);
    ///     let out = rt.call_segments(rt.locality(1), divisors, &numbers, options).await?;
    ///     assert_eq!(out.segment(11), [1, 2, 3, 4]); // 12
    ///     assert_eq!(out.segment(6), [1, 7]); // 7
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn call_segments<A, S, U>(
        &self,
        dest: LocalityId,
        action: A,
        segments: &[S],
        options: SegmentOptions,
    ) -> SegmentsFuture<U>
    where
        A: Action<Args = (SegmentUnit<S>,), Output = SegmentOutput<U>>,
        S: Serialize,
        U: DeserializeOwned + Default + Clone + Send + 'static,
    {
        let _ = action;
        let l = self.inner();
        if let Err(failure) = l.check_dest(dest) {
            return SegmentsFuture::failed(A::NAME, dest, failure);
        }
        let window = l.windows.window();
        let default_unit = if window == 0 {
            UNIT_BYTES_WITHOUT_CREDIT
        } else {
            window / 4
        };
        let unit_bytes = options.unit_bytes_or(default_unit);
        let bounds = match split_units(segments, unit_bytes, options.max_out()) {
            Ok(bounds) => bounds,
            Err(e) => {
                return SegmentsFuture::failed(A::NAME, dest, Failure::EncodeArgs(e.to_string()));
            }
        };
        let units = bounds.len() - 1;
        let stats = &l.segment_stats;
        stats.record_call(segments.len(), units);
        let sink = SegmentSink::<U>::new(bounds.clone(), options.max_out(), Arc::clone(stats));
        let (request, pending) = l.pending.register_batch(Box::new(sink));
        for (part, unit) in bounds.windows(2).enumerate() {
            let [first, end] = [unit[0], unit[1]];
            let unit = SegmentUnitRef {
                first,
                max_out: options.max_out(),
                pack_below: options.packing_threshold(),
                segments: &segments[first as usize..end as usize],
            };
            let reply = ReplyTo::Caller(Caller {
                locality: l.here,
                request,
                part: part as u32,
            });
            l.before_send(dest);
            let sent = l.send_alone(dest, RunKind::Calls, A::ID, |frame| {
                frame.push_call(reply, &(unit,))
            });
            if let Err(failure) = sent {
                l.pending
                    .complete(request, 0, Some(dest), Response::Failed(failure));
                return SegmentsFuture::remote(A::NAME, dest, pending);
            }
        }
        let mut path = Path::empty_set(l.count);
        path.insert(dest);
        seal_batch(l, request, units as u32, path);
        SegmentsFuture::remote(A::NAME, dest, pending)
    }
}
