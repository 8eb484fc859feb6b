//! Removing directory trees the store made, read-only directories and
//! any depth included, without following symlinks: a path-taking front for
//! [`crate::sys::dir::remove_tree_at`].

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::sys::at;

/// Remove `path` and everything under it, without following symlinks, even
/// when directories inside are read-only (they are made writable first) and
/// however deep the tree is (no path-length limit, constant file
/// descriptors). `path` itself may be a file or a symlink.
pub fn remove_tree(path: &Path) -> io::Result<()> {
    let meta = path.symlink_metadata()?;
    if !meta.is_dir() {
        return fs::remove_file(path);
    }
    let parent = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(p) => p.to_path_buf(),
        None => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let parent_fd = at::open_path(
        &parent,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
    )?;
    crate::sys::dir::remove_tree_at(std::os::fd::AsFd::as_fd(&parent_fd), &at::cpath(name)?)
}

#[cfg(test)]
mod tests {
    use std::ffi::{CStr, CString};
    use std::os::fd::{AsFd, BorrowedFd};
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::image::store::tests::TempDir;

    #[test]
    fn remove_tree_handles_deep_read_only_trees_and_symlinks() {
        let tmp = TempDir::new("store-rmtree");
        let top = tmp.path().join("top");
        let outside = tmp.path().join("outside");
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("keep"), b"k").unwrap();
        // deeper than PATH_MAX allows as one path (built with mkdirat)
        fs::create_dir(&top).unwrap();
        let long_name = CString::new("d".repeat(200)).unwrap();
        let open_dir = |dir: BorrowedFd, name: &CStr| {
            at::open_at(dir, name, libc::O_RDONLY | libc::O_DIRECTORY, 0).unwrap()
        };
        let mut dir = at::open_path(&top, libc::O_RDONLY | libc::O_DIRECTORY).unwrap();
        for _ in 0..40 {
            at::mkdir_at(dir.as_fd(), &long_name, 0o755).unwrap();
            dir = open_dir(dir.as_fd(), &long_name);
        }
        // the deepest directory read-only, with a file
        at::open_at(dir.as_fd(), c"f", libc::O_CREAT | libc::O_WRONLY, 0o444).unwrap();
        at::fchmod(dir.as_fd(), 0o500).unwrap();
        drop(dir);
        // read-only dirs and a symlink to outside
        std::os::unix::fs::symlink(&outside, top.join("link")).unwrap();
        fs::create_dir(top.join("ro")).unwrap();
        fs::write(top.join("ro/f"), b"x").unwrap();
        fs::set_permissions(top.join("ro/f"), fs::Permissions::from_mode(0o000)).unwrap();
        fs::set_permissions(top.join("ro"), fs::Permissions::from_mode(0o000)).unwrap();
        fs::set_permissions(&top, fs::Permissions::from_mode(0o555)).unwrap();
        remove_tree(&top).unwrap();
        assert!(!top.exists());
        assert!(outside.join("keep").exists());
        // a symlink or a file as the argument
        std::os::unix::fs::symlink(&outside, tmp.path().join("l2")).unwrap();
        remove_tree(&tmp.path().join("l2")).unwrap();
        assert!(outside.join("keep").exists());
    }
}
