//! One request issued on a connection, from its intended send time to its response: its own
//! module, so that the HTTP/1.1 connection (`conn`) and the h2c state (`h2`) both use it
//! without using each other both ways.

#[derive(Clone, Copy)]
pub(super) struct Slot {
    /// When the request should have been sent (open loop), connect start (connection per
    /// request) or 0 = same as `sent`.
    pub(super) intended: u64,
    /// When the write of the request started; 0 = not written yet.
    pub(super) sent: u64,
    /// h2c: the request's stream id once written (0: HTTP/1.1, or not written yet).
    pub(super) stream: u32,
    /// A mix: the entry drawn for this request (its index in `Plan::mix`); 0 otherwise.
    pub(super) entry: u32,
}
