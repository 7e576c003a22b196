//! The connection's flow-control window (protocol.md §4.6): bytes sent but not yet
//! acknowledged by DCP_BUFFER_ACK, against the `connection_buffer_size` the consumer set.
//!
//! The rule is "any space left", not "the next message fits": a document may be larger than
//! the whole window (20 MiB items against windows of a few MiB), and waiting for room that
//! can never appear would stall the stream forever. The price is an overshoot of at most one
//! message, so `unacked < window + largest message` always holds.

/// Byte accounting of one producer connection. Window sizes are per connection only; the
/// protocol never had per-stream windows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowControl {
    /// `None`: the consumer did not ask for flow control (or set the size to 0).
    window: Option<usize>,
    unacked: usize,
    over_acked: u64,
}

impl FlowControl {
    /// No window: everything may be sent, nothing is counted. The default until the
    /// consumer sends `connection_buffer_size`.
    pub fn disabled() -> Self {
        FlowControl {
            window: None,
            unacked: 0,
            over_acked: 0,
        }
    }

    /// Applies `connection_buffer_size`; 0 disables flow control.
    ///
    /// Resizing an enabled window keeps the unacked count: those bytes are still in the
    /// consumer's buffer and it will ack them. Disabling forgets it, since a consumer without
    /// flow control no longer acks, and enabling again starts from 0 because nothing sent
    /// while disabled will ever be acked.
    pub fn set_window(&mut self, bytes: u32) {
        if bytes == 0 {
            self.window = None;
            self.unacked = 0;
        } else {
            self.window = Some(bytes as usize);
        }
    }

    /// Whether the next message may start: some space is left in the window (or there is no
    /// window). The message itself may be larger than the space left.
    pub fn can_send(&self) -> bool {
        match self.window {
            None => true,
            Some(window) => self.unacked < window,
        }
    }

    /// Counts a message of `wire_bytes` bytes (its full encoded size). Callers skip
    /// DCP_NOOP, which the protocol leaves out of the window so that a connection blocked on
    /// acks can still prove it is alive.
    pub fn on_sent(&mut self, wire_bytes: usize) {
        if self.window.is_some() {
            self.unacked = self.unacked.saturating_add(wire_bytes);
        }
    }

    /// Applies a DCP_BUFFER_ACK. Saturates at 0: consumers written for the reference server
    /// ack 2 bytes more per PREPARE than they received (MB-46634), and an over-ack must not
    /// wrap the counter or be held against later messages. The excess is counted in
    /// [`FlowControl::over_acked_bytes`] so a misbehaving consumer shows in stats. Ignored
    /// while disabled: those acks refer to bytes this window never counted.
    pub fn on_ack(&mut self, bytes: u32) {
        if self.window.is_none() {
            return;
        }
        let bytes = bytes as usize;
        let acked = bytes.min(self.unacked);
        self.unacked -= acked;
        self.over_acked = self.over_acked.saturating_add((bytes - acked) as u64);
    }

    /// Bytes sent and not yet acknowledged (0 while disabled).
    pub fn unacked(&self) -> usize {
        self.unacked
    }

    /// The window in bytes, `None` when flow control is off.
    pub fn window(&self) -> Option<usize> {
        self.window
    }

    /// Bytes acknowledged beyond what was outstanding, over the connection's life.
    pub fn over_acked_bytes(&self) -> u64 {
        self.over_acked
    }
}

impl Default for FlowControl {
    fn default() -> Self {
        FlowControl::disabled()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (SplitMix64), so the property tests need no crates and
    /// every failure reproduces.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    #[test]
    fn disabled_sends_everything_and_counts_nothing() {
        let mut fc = FlowControl::disabled();
        assert_eq!(fc, FlowControl::default());
        for _ in 0..1000 {
            assert!(fc.can_send());
            fc.on_sent(1 << 20);
        }
        fc.on_ack(100);
        assert_eq!(
            (fc.unacked(), fc.window(), fc.over_acked_bytes()),
            (0, None, 0)
        );
    }

    #[test]
    fn any_space_left_lets_a_message_larger_than_the_window_go() {
        let mut fc = FlowControl::disabled();
        fc.set_window(100);
        assert_eq!(fc.window(), Some(100));
        assert!(fc.can_send());
        fc.on_sent(99);
        assert!(fc.can_send(), "one byte left is space left");
        fc.on_sent(20 << 20); // a 20 MiB document into a 100-byte window
        assert!(!fc.can_send());
        fc.on_ack((20 << 20) + 98);
        assert!(fc.can_send());
        assert_eq!(fc.unacked(), 1);
        fc.on_ack(1);
        assert_eq!(fc.unacked(), 0);
    }

    #[test]
    fn blocks_exactly_at_the_window() {
        let mut fc = FlowControl::disabled();
        fc.set_window(100);
        fc.on_sent(100);
        assert!(!fc.can_send());
        fc.on_ack(1);
        assert!(fc.can_send());
    }

    #[test]
    fn over_acks_saturate_and_are_counted() {
        let mut fc = FlowControl::disabled();
        fc.set_window(1000);
        // A reference-style consumer acking PREPAREs: 2 bytes more than each message.
        for _ in 0..10 {
            fc.on_sent(50);
            fc.on_ack(52);
            assert_eq!(fc.unacked(), 0);
        }
        assert_eq!(fc.over_acked_bytes(), 20);
        fc.on_sent(50);
        fc.on_ack(u32::MAX);
        assert_eq!(fc.unacked(), 0);
        assert_eq!(fc.over_acked_bytes(), 20 + u64::from(u32::MAX) - 50);
    }

    #[test]
    fn resizing_keeps_the_count_and_disabling_forgets_it() {
        let mut fc = FlowControl::disabled();
        fc.set_window(1000);
        fc.on_sent(600);
        fc.set_window(500); // shrunk below what is outstanding: wait for acks
        assert_eq!(fc.unacked(), 600);
        assert!(!fc.can_send());
        fc.on_ack(101);
        assert!(fc.can_send());
        fc.set_window(0);
        assert_eq!((fc.window(), fc.unacked()), (None, 0));
        assert!(fc.can_send());
        fc.on_ack(400); // late acks of the old window
        assert_eq!(fc.over_acked_bytes(), 0);
        fc.set_window(10);
        assert_eq!(fc.unacked(), 0);
    }

    /// A producer that starts a message whenever `can_send` allows, and a consumer that acks
    /// what it received in random chunks at random moments. Over many seeds, window sizes
    /// and message sizes (some larger than the window), checks that:
    /// - a message is never started with `unacked >= window`;
    /// - so `unacked` never exceeds `window + largest message - 1`;
    /// - every message is eventually sent (acks always unblock the sender), and everything
    ///   sent is eventually acked back to 0.
    #[test]
    fn a_sender_following_can_send_stays_within_one_message_of_the_window() {
        for seed in 0..200 {
            let mut rng = Rng(seed);
            let window = 1 + rng.below(4096) as usize;
            let largest = 1 + rng.below(3 * window as u64) as usize;
            let mut fc = FlowControl::disabled();
            fc.set_window(window as u32);

            let mut to_send: Vec<usize> = (0..500)
                .map(|_| 1 + rng.below(largest as u64) as usize)
                .collect();
            to_send.push(largest);
            to_send.reverse(); // popped from the back: the largest goes first
            let total = to_send.len();
            let mut sent = 0;
            let mut received = 0usize; // bytes the consumer holds and has not acked
            let mut blocked_steps = 0;

            while sent < total || received > 0 {
                if sent < total && fc.can_send() && rng.below(4) != 0 {
                    assert!(
                        fc.unacked() < window,
                        "seed {seed}: started a message when full"
                    );
                    let size = to_send.pop().expect("a message left");
                    fc.on_sent(size);
                    received += size;
                    sent += 1;
                    blocked_steps = 0;
                    assert!(
                        fc.unacked() < window + largest,
                        "seed {seed}: unacked {} window {window} largest {largest}",
                        fc.unacked()
                    );
                } else if received > 0 && rng.below(3) == 0 {
                    let ack = 1 + rng.below(received as u64) as usize;
                    fc.on_ack(ack as u32);
                    received -= ack;
                } else if sent < total && !fc.can_send() {
                    blocked_steps += 1;
                    assert!(received > 0, "seed {seed}: blocked with nothing to ack");
                    assert!(blocked_steps < 10_000, "seed {seed}: no progress");
                }
                assert_eq!(fc.unacked(), received, "seed {seed}: accounting drifted");
            }
            assert_eq!(fc.unacked(), 0);
            assert!(fc.can_send());
            assert_eq!(fc.over_acked_bytes(), 0);
        }
    }
}
