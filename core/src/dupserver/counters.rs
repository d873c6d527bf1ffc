//! What a duplicate server (or replica) counts for `/metrics`.

/// What a duplicate server (or replica) has been asked, for `/metrics`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DupCounters {
    /// PPDUP_ADD messages for a known collection (3.3.5.4, 3.4.5.3).
    pub adds: u64,
    /// PPDUP_REMOVE messages for a known collection (3.3.5.5, 3.4.5.4).
    pub removes: u64,
}
