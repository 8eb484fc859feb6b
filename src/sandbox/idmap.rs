//! Which host ids the sandbox's ids map to.
//!
//! - Real root: the sandbox's 0..65535 map to an unprivileged host range,
//!   never to host root, so files only host root may read stay unreadable.
//! - A user with subordinate ranges (newuidmap): 0 is the caller, 1..N the
//!   subordinate range.
//! - A user with only their own id: that one id is the sandbox's uid 0
//!   (libcontainer's setup needs a root); a `--user` uid is a nested user
//!   namespace mapping that uid onto it, entered just before exec.

use serde::Serialize;

use super::config::Identity;

/// What the host allows, as far as mapping goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MappingSource {
    SingleId {
        uid: u32,
        gid: u32,
    },
    Ranges {
        uid: u32,
        gid: u32,
        sub_uid: (u32, u32),
        sub_gid: (u32, u32),
    },
    RootRange {
        start: u32,
        len: u32,
    },
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct IdPlan {
    /// "single-id", "ranges" or "root-range".
    pub kind: &'static str,
    /// (inside, host, length)
    pub uid_map: Vec<(u32, u32, u32)>,
    pub gid_map: Vec<(u32, u32, u32)>,
    /// The identity the command runs as.
    pub uid: u32,
    pub gid: u32,
    /// With a single id, libcontainer needs that id to be the sandbox's
    /// root; a non-root `--user` is then a nested user namespace that maps
    /// (uid, gid) onto it, entered just before exec.
    pub nested: Option<(u32, u32)>,
}

impl IdPlan {
    pub fn inside(&self) -> (u32, u32) {
        (self.uid, self.gid)
    }

    /// The identity libcontainer switches to.
    pub fn spec_user(&self) -> (u32, u32) {
        if self.nested.is_some() {
            (0, 0)
        } else {
            (self.uid, self.gid)
        }
    }

    /// Host uid that a given inside uid maps to.
    pub fn host_uid(&self, inside: u32) -> Option<u32> {
        self.uid_map
            .iter()
            .find(|(i, _, l)| inside >= *i && inside < i + l)
            .map(|(i, h, _)| h + (inside - i))
    }

    pub fn host_gid(&self, inside: u32) -> Option<u32> {
        self.gid_map
            .iter()
            .find(|(i, _, l)| inside >= *i && inside < i + l)
            .map(|(i, h, _)| h + (inside - i))
    }
}

pub fn plan(src: &MappingSource, user: Option<Identity>) -> IdPlan {
    let want = user.unwrap_or(Identity { uid: 0, gid: 0 });
    match *src {
        MappingSource::RootRange { start, len } => IdPlan {
            kind: "root-range",
            uid_map: vec![(0, start, len)],
            gid_map: vec![(0, start, len)],
            uid: want.uid,
            gid: want.gid,
            nested: None,
        },
        MappingSource::Ranges {
            uid,
            gid,
            sub_uid,
            sub_gid,
        } => {
            let ul = sub_uid.1.min(65535);
            let gl = sub_gid.1.min(65535);
            IdPlan {
                kind: "ranges",
                uid_map: vec![(0, uid, 1), (1, sub_uid.0, ul)],
                gid_map: vec![(0, gid, 1), (1, sub_gid.0, gl)],
                uid: want.uid,
                gid: want.gid,
                nested: None,
            }
        }
        MappingSource::SingleId { uid, gid } => IdPlan {
            kind: "single-id",
            uid_map: vec![(0, uid, 1)],
            gid_map: vec![(0, gid, 1)],
            uid: want.uid,
            gid: want.gid,
            nested: (want.uid != 0 || want.gid != 0).then_some((want.uid, want.gid)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_never_maps_to_host_root() {
        let p = plan(
            &MappingSource::RootRange {
                start: 1 << 30,
                len: 65536,
            },
            None,
        );
        assert_eq!(p.host_uid(0), Some(1 << 30));
        for inside in [0, 1, 1000, 65535] {
            assert_ne!(p.host_uid(inside), Some(0));
            assert_ne!(p.host_gid(inside), Some(0));
        }
    }

    #[test]
    fn single_id_maps_the_requested_user_to_the_caller_through_a_nested_namespace() {
        let src = MappingSource::SingleId {
            uid: 1000,
            gid: 1000,
        };
        let p = plan(
            &src,
            Some(Identity {
                uid: 1000,
                gid: 1000,
            }),
        );
        assert_eq!(p.uid_map, vec![(0, 1000, 1)]);
        assert_eq!(p.inside(), (1000, 1000));
        assert_eq!(p.spec_user(), (0, 0));
        assert_eq!(p.nested, Some((1000, 1000)));
        let p = plan(&src, None);
        assert_eq!(p.uid_map, vec![(0, 1000, 1)]);
        assert_eq!(p.nested, None);
    }

    #[test]
    fn ranges_put_the_caller_at_zero() {
        let src = MappingSource::Ranges {
            uid: 1000,
            gid: 1000,
            sub_uid: (100000, 65536),
            sub_gid: (100000, 65536),
        };
        let p = plan(
            &src,
            Some(Identity {
                uid: 1000,
                gid: 1000,
            }),
        );
        assert_eq!(p.host_uid(0), Some(1000));
        assert_eq!(p.host_uid(1000), Some(100999));
    }
}
