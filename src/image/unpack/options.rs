//! What a caller asks of an unpack ([`UnpackOptions`], [`OwnerMode`]) and
//! what it gets back ([`UnpackReport`]).

/// Who owns what a layer creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerMode {
    /// Single-id mapping: everything stays owned by the caller; the tar's
    /// ids are not applied (entries with ids other than 0:0 are counted in
    /// `ids_not_applied`).
    Caller,
    /// Root, or a newuidmap range: chown to the tar's uid/gid plus the
    /// shifts (implicitly created directories get the shifted 0:0). Needs
    /// CAP_CHOWN over those ids; a failed chown fails the layer.
    Preserve { uid_shift: u32, gid_shift: u32 },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnpackOptions {
    pub owner: OwnerMode,
    pub keep_xattrs: bool,
    /// Regular-file content written, and separately the data the tars
    /// carry (any entry type, written or not), each summed over the
    /// layers of one call. Hard links count nothing.
    pub max_bytes: u64,
    /// Tar entries of any kind, whiteouts included, summed likewise.
    pub max_entries: u64,
}

impl Default for UnpackOptions {
    fn default() -> Self {
        UnpackOptions {
            owner: OwnerMode::Caller,
            keep_xattrs: true,
            max_bytes: 64 << 30,
            max_entries: 2_000_000,
        }
    }
}

/// What was applied; `apply_layers` sums its layers.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct UnpackReport {
    pub files: u64,
    /// Directory entries, created or merged.
    pub dirs: u64,
    pub symlinks: u64,
    pub hardlinks: u64,
    /// `.wh.` entries (not counting opaque markers).
    pub whiteouts: u64,
    pub opaque_dirs: u64,
    /// Regular-file content written.
    pub bytes: u64,
    /// Character and block devices and FIFOs.
    pub devices_dropped: u64,
    pub setid_stripped: u64,
    pub xattrs_dropped: u64,
    /// `OwnerMode::Caller` only: entries whose tar ids were not 0:0.
    pub ids_not_applied: u64,
    /// (entry, why) for entries left out (the first 1000).
    pub skipped: Vec<(String, String)>,
}
