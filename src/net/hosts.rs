//! The built-in host lists, as data.
//!
//! Every entry is a domain that matches itself and all of its subdomains
//! (`github.com` covers `api.github.com` and `gist.github.com`). Hosts
//! passed in are expected normalized: lowercase, no trailing dot.

/// Public code hosting, code search and archives of public code: always
/// denied, whatever the allowlist says, because reaching them lets an agent
/// fetch an existing implementation instead of writing one.
pub const CODE_HOSTS: &[&str] = &[
    // GitHub and its content/asset/package domains.
    "github.com",
    "githubusercontent.com",
    "githubassets.com",
    "github.io",
    "github.dev",
    "ghcr.io",
    // GitLab, Bitbucket and other forges.
    "gitlab.com",
    "gitlab.io",
    "bitbucket.org",
    "bitbucket.io",
    "gitee.com",
    "codeberg.org",
    "codeberg.page",
    "sourceforge.net",
    "sr.ht",
    "launchpad.net",
    "googlesource.com",
    "gitea.com",
    "pagure.io",
    "savannah.gnu.org",
    "git.kernel.org",
    "notabug.org",
    "gitflic.ru",
    "repo.or.cz",
    "framagit.org",
    "opendev.org",
    "salsa.debian.org",
    "gitlab.gnome.org",
    "gitlab.freedesktop.org",
    "invent.kde.org",
    "src.fedoraproject.org",
    "dev.azure.com",
    // Code search and archives of public repositories.
    "sourcegraph.com",
    "grep.app",
    "searchcode.com",
    "softwareheritage.org",
    // CDNs that serve any repository file by URL (`/gh/OWNER/REPO@REF/...`).
    "jsdelivr.net",
    "githack.com",
];

/// Package registries, their well-known mirrors, CDNs that serve any
/// published package's files by URL, and distribution archives: denied
/// unless the run passes `--allow-registries`. A benchmark's reference
/// solution may be a published package, so registries are opt-in. The
/// mirrors are the common ones, not all: `*` reaches any other.
pub const REGISTRIES: &[&str] = &[
    // Python
    "pypi.org",
    "files.pythonhosted.org",
    "pypi.python.org",
    "pythonhosted.org",
    "download.pytorch.org",
    "piwheels.org",
    "pypi.tuna.tsinghua.edu.cn",
    "mirrors.tuna.tsinghua.edu.cn",
    "mirrors.aliyun.com",
    "pypi.doubanio.com",
    "mirrors.cloud.tencent.com",
    "repo.huaweicloud.com",
    "mirrors.ustc.edu.cn",
    "mirror.baidu.com",
    // JavaScript
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "npmjs.com",
    "npmjs.org",
    "yarnpkg.com",
    "npmmirror.com",
    "npm.taobao.org",
    "unpkg.com",
    "esm.sh",
    "skypack.dev",
    "jspm.io",
    "cdnjs.cloudflare.com",
    "deno.land",
    "jsr.io",
    // Go
    "proxy.golang.org",
    "sum.golang.org",
    "goproxy.io",
    "goproxy.cn",
    // Rust
    "crates.io",
    "static.crates.io",
    "index.crates.io",
    "rsproxy.cn",
    // Conda
    "repo.anaconda.com",
    "conda.anaconda.org",
    "anaconda.org",
    // JVM
    "repo.maven.apache.org",
    "repo1.maven.org",
    "plugins.gradle.org",
    // Ruby, PHP, Elixir, Dart, .NET, Haskell, R, Perl, Swift/ObjC
    "rubygems.org",
    "packagist.org",
    "hex.pm",
    "pub.dev",
    "nuget.org",
    "hackage.haskell.org",
    "cran.r-project.org",
    "cpan.org",
    "cocoapods.org",
    // OS package archives
    "deb.debian.org",
    "security.debian.org",
    "archive.ubuntu.com",
    "security.ubuntu.com",
    "ports.ubuntu.com",
    "dl-cdn.alpinelinux.org",
];

/// True when `host` is `domain` or one of its subdomains. A plain suffix
/// test would let `evilgithub.com` match `github.com`; the label boundary
/// check prevents that.
pub fn domain_matches(host: &str, domain: &str) -> bool {
    match host.strip_suffix(domain) {
        Some("") => true,
        Some(prefix) => prefix.ends_with('.'),
        None => false,
    }
}

/// The code-host entry covering `host`, if any.
pub fn code_host(host: &str) -> Option<&'static str> {
    if let Some(d) = CODE_HOSTS.iter().find(|d| domain_matches(host, d)) {
        return Some(d);
    }
    // AWS CodeCommit's git endpoints are per region
    // (`git-codecommit.REGION.amazonaws.com`), so no fixed suffix covers them.
    if host.starts_with("git-codecommit.") && domain_matches(host, "amazonaws.com") {
        return Some("git-codecommit.*.amazonaws.com");
    }
    None
}

/// The registry entry covering `host`, if any.
pub fn registry(host: &str) -> Option<&'static str> {
    REGISTRIES.iter().find(|d| domain_matches(host, d)).copied()
}

/// The registries cbrun's index serves filtered (PyPI and npm, with their
/// file hosts): while the index is the wall, the sandbox never reaches
/// them directly.
pub const INDEXED: &[&str] = &[
    "pypi.org",
    "files.pythonhosted.org",
    "pypi.python.org",
    "pythonhosted.org",
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "npmjs.com",
    "npmjs.org",
    "yarnpkg.com",
];

/// Whether `host` belongs to a registry the index serves.
pub fn indexed(host: &str) -> bool {
    INDEXED.iter().any(|d| domain_matches(host, d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_boundary() {
        assert!(domain_matches("github.com", "github.com"));
        assert!(domain_matches("api.github.com", "github.com"));
        assert!(domain_matches("a.b.github.com", "github.com"));
        assert!(!domain_matches("evilgithub.com", "github.com"));
        assert!(!domain_matches("github.com.evil.org", "github.com"));
        assert!(!domain_matches("com", "github.com"));
    }

    #[test]
    fn lists() {
        assert_eq!(
            code_host("raw.githubusercontent.com"),
            Some("githubusercontent.com")
        );
        assert_eq!(code_host("git.sr.ht"), Some("sr.ht"));
        assert_eq!(
            code_host("chromium.googlesource.com"),
            Some("googlesource.com")
        );
        assert_eq!(code_host("git.savannah.gnu.org"), Some("savannah.gnu.org"));
        assert_eq!(code_host("gnu.org"), None);
        assert_eq!(code_host("kernel.org"), None);
        assert!(code_host("git-codecommit.us-east-1.amazonaws.com").is_some());
        assert_eq!(code_host("s3.amazonaws.com"), None);
        assert_eq!(code_host("api.openai.com"), None);
        assert_eq!(
            registry("files.pythonhosted.org"),
            Some("files.pythonhosted.org")
        );
        assert_eq!(registry("www.npmjs.com"), Some("npmjs.com"));
        assert_eq!(registry("api.anthropic.com"), None);
        assert_eq!(registry("registry.npmmirror.com"), Some("npmmirror.com"));
        assert!(indexed("files.pythonhosted.org") && indexed("registry.npmjs.org"));
        assert!(!indexed("static.crates.io") && !indexed("unpkg.com"));
        for d in INDEXED {
            assert!(registry(d).is_some(), "{d} is indexed but not a registry");
        }
    }

    #[test]
    fn entries_are_normalized() {
        for d in CODE_HOSTS.iter().chain(REGISTRIES).chain(INDEXED) {
            assert_eq!(*d, d.to_ascii_lowercase(), "{d}");
            assert!(
                !d.ends_with('.') && !d.starts_with('.') && d.contains('.'),
                "{d}"
            );
        }
    }
}
