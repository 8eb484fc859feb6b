//! C and C++ includes: `#include <x.h>` and `#include "x/y.h"` (also
//! `#include_next` and `#import`). A ban without an extension names a
//! library: `zlib` matches `zlib.h`, `zlib` and `zlib/anything`. A ban with
//! one names a header: `openssl/sha.h` matches only itself.

use super::clike::{self, Dialect};
use super::lex::Tok;
use super::Hit;

pub(crate) fn scan(text: &str, bans: &[String]) -> Vec<Hit> {
    let bans: Vec<(&str, &str)> = bans
        .iter()
        .map(|b| b.trim())
        .map(|b| (header_of_ban(b), b))
        .filter(|(b, _)| !b.is_empty())
        .collect();
    if bans.is_empty() {
        return Vec::new();
    }
    let mut hits = Vec::new();
    for t in clike::lex(text, Dialect::C) {
        let Tok::Include(header) = &t.tok else {
            continue;
        };
        for (ban, written) in &bans {
            if header_matches(header, ban) {
                hits.push((t.line, header.clone(), written.to_string()));
            }
        }
    }
    hits
}

/// A ban as a header path: without the `<>` or quotes someone may have
/// written around it, nor a leading `./` or trailing `/`.
fn header_of_ban(ban: &str) -> &str {
    let b = ban
        .trim_start_matches('<')
        .trim_end_matches('>')
        .trim_matches('"');
    b.strip_prefix("./").unwrap_or(b).trim_end_matches('/')
}

/// `path` without the extension of its last component (`a/b.h` -> `a/b`).
fn strip_ext(path: &str) -> &str {
    let name_start = path.rfind('/').map_or(0, |i| i + 1);
    match path[name_start..].rfind('.') {
        Some(dot) if dot > 0 => &path[..name_start + dot],
        _ => path,
    }
}

fn header_matches(header: &str, ban: &str) -> bool {
    let header = header.strip_prefix("./").unwrap_or(header);
    if strip_ext(ban) != ban {
        return header == ban;
    }
    header == ban
        || strip_ext(header) == ban
        || header
            .strip_prefix(ban)
            .is_some_and(|rest| rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hits(src: &str, list: &[&str]) -> Vec<(usize, String, String)> {
        let bans: Vec<String> = list.iter().map(|s| s.to_string()).collect();
        let mut h = scan(src, &bans);
        h.sort();
        h
    }

    fn h(line: usize, import: &str, banned: &str) -> (usize, String, String) {
        (line, import.to_string(), banned.to_string())
    }

    #[test]
    fn library_bans_match_header_dir_and_stem() {
        let src = "#include <zlib.h>\n#include \"zlib/inflate.h\"\n#  include <zlib>\n#include <zlibx.h>\n#include <myzlib.h>\n#include \"./zlib.h\"\n";
        assert_eq!(
            hits(src, &["zlib"]),
            [
                h(1, "zlib.h", "zlib"),
                h(2, "zlib/inflate.h", "zlib"),
                h(3, "zlib", "zlib"),
                h(6, "./zlib.h", "zlib"),
            ]
        );
    }

    #[test]
    fn header_bans_match_exactly() {
        let src = "#include <openssl/sha.h>\n#include <openssl/evp.h>\n#include <openssl/sha.hpp>\n#include <sha.h>\n";
        assert_eq!(
            hits(src, &["openssl/sha.h"]),
            [h(1, "openssl/sha.h", "openssl/sha.h")]
        );
        assert_eq!(
            hits(src, &["<openssl/evp.h>"]),
            [h(2, "openssl/evp.h", "<openssl/evp.h>")]
        );
        assert_eq!(hits(src, &["openssl"]).len(), 3);
    }

    #[test]
    fn directory_bans_and_cpp_headers() {
        let src = "#include <boost/asio.hpp>\n#include <boost/asio/ip/tcp.hpp>\n#include <boost/beast.hpp>\n#include <vector>\n";
        assert_eq!(
            hits(src, &["boost/asio", "vector"]),
            [
                h(1, "boost/asio.hpp", "boost/asio"),
                h(2, "boost/asio/ip/tcp.hpp", "boost/asio"),
                h(4, "vector", "vector"),
            ]
        );
    }

    #[test]
    fn comments_strings_and_non_directives_are_ignored() {
        let src = r##"// #include <zlib.h>
/*
#include <zlib.h>
*/
const char *s = "#include <zlib.h>";
int x; #include <zlib.h>
#if __has_include(<zlib.h>)
#endif
"##;
        assert!(hits(src, &["zlib"]).is_empty());
    }

    #[test]
    fn strip_ext_only_touches_the_last_component() {
        assert_eq!(strip_ext("a.d/b"), "a.d/b");
        assert_eq!(strip_ext("a/b.h"), "a/b");
        assert_eq!(strip_ext(".hidden"), ".hidden");
        assert_eq!(strip_ext("x.tar.h"), "x.tar");
    }
}
