//! Flow-control acknowledgements: how many delivered bytes to DCP_BUFFER_ACK, and when.
//!
//! Bytes are counted when a message is delivered to the application (or consumed
//! internally), not when it arrives: acking on arrival would let the producer refill the
//! window while the application lags, and the client would buffer without bound
//! (dcp-lessons.md, client problem 5). An ack goes out once 20 % of the window is pending,
//! and on a timer for slow trickles, so the producer's count never drifts far from the truth.

use std::time::{Duration, Instant};

use sluice_proto::encode::Packet;
use sluice_proto::Opcode;

/// Pending bytes are acked after this long even below the threshold.
const ACK_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub(crate) struct Acks {
    threshold: u64,
    pending: u64,
    last_ack: Instant,
}

impl Acks {
    pub(crate) fn new(window_bytes: u32) -> Acks {
        Acks {
            threshold: (u64::from(window_bytes) / 5).max(1),
            pending: 0,
            last_ack: Instant::now(),
        }
    }

    /// Counts a consumed message; returns an ack to send if the threshold is reached.
    pub(crate) fn consumed(&mut self, wire_bytes: usize, now: Instant) -> Option<Vec<u8>> {
        self.pending += wire_bytes as u64;
        (self.pending >= self.threshold).then(|| self.take(now))
    }

    /// An ack for what is pending, if the timer says it is time.
    pub(crate) fn due(&mut self, now: Instant) -> Option<Vec<u8>> {
        (self.pending > 0 && now.duration_since(self.last_ack) >= ACK_EVERY).then(|| self.take(now))
    }

    /// Bytes delivered and not yet acked.
    pub(crate) fn pending(&self) -> u64 {
        self.pending
    }

    /// DCP_BUFFER_ACK packet(s) for everything pending (one, unless more than 4 GiB is
    /// pending, which a window of at most 4 GiB plus one message never allows).
    fn take(&mut self, now: Instant) -> Vec<u8> {
        let mut out = Vec::with_capacity(28);
        while self.pending > 0 {
            let n = self.pending.min(u64::from(u32::MAX)) as u32;
            Packet::request(Opcode::DcpBufferAck.byte(), 0, 0)
                .extras(&n.to_be_bytes())
                .encode_into(&mut out);
            self.pending -= u64::from(n);
        }
        self.last_ack = now;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acks_at_a_fifth_of_the_window_and_on_the_timer() {
        let t0 = Instant::now();
        let mut a = Acks::new(1000);
        assert!(a.consumed(150, t0).is_none());
        let ack = a.consumed(60, t0).expect("210 >= 200");
        assert_eq!(&ack[..2], &[0x80, 0x5d]);
        assert_eq!(&ack[24..28], &210u32.to_be_bytes());
        assert_eq!(a.pending(), 0);
        assert!(a.consumed(10, t0).is_none());
        assert!(a.due(t0 + Duration::from_millis(10)).is_none());
        let ack = a.due(t0 + ACK_EVERY).expect("timer");
        assert_eq!(&ack[24..28], &10u32.to_be_bytes());
        assert!(a.due(t0 + 10 * ACK_EVERY).is_none(), "nothing pending");
    }
}
