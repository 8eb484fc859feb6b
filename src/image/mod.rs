//! Container images: a local content-addressed store, import from OCI
//! layouts, oci-archives, docker-archives and plain root filesystems, export
//! as OCI layouts, registry pulls, and unpacking layers into a root
//! filesystem.
//!
//! # Store layout
//!
//! The store lives in `$CBRUN_HOME`, else `/var/lib/cbrun` for euid 0, else
//! `$XDG_DATA_HOME/cbrun`, else `$HOME/.local/share/cbrun`, and must belong to
//! the user running cbrun:
//!
//! ```text
//! blobs/sha256/<hex>                 content-addressed blobs (manifests, configs,
//!                                    layers as published), files mode 0444
//! images/<escaped name>/<tag>.json   a reference: {"name", "tag", "manifest":
//!                                    "sha256:...", "created", "source"}
//! images/<escaped name>/@<hex>.json  a reference by manifest digest only (no tag)
//! rootfs/<manifest hex>/             unpacked read-only root filesystem of an image
//! tmp/                               in-progress writes (blobs, refs, unpacks)
//! lock                               flock: exclusive around reference changes,
//!                                    rm and gc
//! gc.lock                            flock: shared while importing, pulling,
//!                                    unpacking or running from rootfs/ (a
//!                                    `store::Hold`); exclusive for gc
//! ```
//!
//! `<escaped name>` is the repository name with `%`, `/` and `:` written as
//! `%25`, `%2F` and `%3A` (`localhost:5000/a/b` → `localhost%3A5000%2Fa%2Fb`).
//!
//! Invariants: a blob file's content hashes to its name (checked when it is
//! written and whenever it is read); a reference is written last, atomically
//! (temp file in `tmp/`, fsync, rename), under `lock`, after checking that
//! the manifest, its config and all its layers are present; so a killed
//! import or pull leaves at most unreferenced blobs and `tmp/` entries, which
//! `gc` (and, for `tmp/` entries older than an hour, the next open) removes.
//! Multi-platform indexes are never stored: import and pull pick one
//! platform's manifest.
//!
//! # Writing into the store (pull, unpack)
//!
//! Hold a `store::Hold` (`Store::hold`) for the whole operation, so that a
//! concurrent `gc` cannot collect what is not referenced yet. Pull: skip
//! blobs for which `Store::has_blob` is true, stream the others through
//! `Store::put_blob(reader, Some(&digest))` (verified; nothing is stored on a
//! mismatch), then `Store::commit_image(&ImageRef, manifest_bytes, source)`,
//! which checks that the config and every layer are present before writing
//! the reference. Unpack: read layers with `Store::open_blob` (verifying
//! reader), build the tree under `Store::temp_path("rootfs")` and rename it
//! to `Store::rootfs_dir(&manifest_digest)`; `store::remove_tree` deletes
//! such trees, read-only directories included.

pub mod bootstrap;
pub mod build;
pub mod ca;
pub mod digest;
pub mod export;
pub mod hasher;
pub mod import;
pub mod layout;
pub mod platform;
pub mod pull;
pub mod sink;
pub mod store;
pub mod unpack;
pub mod unpacked;
