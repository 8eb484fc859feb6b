//! Registry authentication: `WWW-Authenticate` challenges, Basic
//! credentials, bearer tokens (cached per realm/service/scope).

use std::collections::HashMap;

/// One challenge of a `WWW-Authenticate` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Challenge {
    Bearer {
        realm: String,
        service: Option<String>,
        scope: Option<String>,
    },
    Basic,
    Other(String),
}

/// Parse every challenge of a `WWW-Authenticate` value, e.g.
/// `Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/debian:pull"`.
pub(crate) fn parse_challenges(header: &str) -> Vec<Challenge> {
    let mut p = Cursor {
        s: header.as_bytes(),
        i: 0,
    };
    let mut out = Vec::new();
    loop {
        p.skip(|b| b == b' ' || b == b'\t' || b == b',');
        let scheme = p.token();
        if scheme.is_empty() {
            break;
        }
        let mut params: HashMap<String, String> = HashMap::new();
        loop {
            p.skip(|b| b == b' ' || b == b'\t');
            let save = p.i;
            let name = p.token();
            p.skip(|b| b == b' ' || b == b'\t');
            if name.is_empty() || !p.eat(b'=') {
                // the next challenge's scheme (or a token68, ignored)
                p.i = save;
                break;
            }
            p.skip(|b| b == b' ' || b == b'\t');
            let value = if p.peek() == Some(b'"') {
                p.quoted()
            } else {
                p.token()
            };
            params.insert(name.to_ascii_lowercase(), value);
            p.skip(|b| b == b' ' || b == b'\t');
            if !p.eat(b',') {
                break;
            }
        }
        let c = match scheme.to_ascii_lowercase().as_str() {
            "bearer" => match params.remove("realm") {
                Some(realm) => Challenge::Bearer {
                    realm,
                    service: params.remove("service"),
                    scope: params.remove("scope"),
                },
                None => Challenge::Other(scheme),
            },
            "basic" => Challenge::Basic,
            _ => Challenge::Other(scheme),
        };
        out.push(c);
    }
    out
}

struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~/:".contains(&b)
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn skip(&mut self, f: impl Fn(u8) -> bool) {
        while self.peek().is_some_and(&f) {
            self.i += 1;
        }
    }
    fn token(&mut self) -> String {
        let start = self.i;
        self.skip(is_tchar);
        String::from_utf8_lossy(&self.s[start..self.i]).into_owned()
    }
    fn quoted(&mut self) -> String {
        let mut out = Vec::new();
        self.i += 1; // opening quote
        while let Some(b) = self.peek() {
            self.i += 1;
            match b {
                b'"' => break,
                b'\\' => {
                    if let Some(n) = self.peek() {
                        out.push(n);
                        self.i += 1;
                    }
                }
                _ => out.push(b),
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// `Basic base64(user:pass)`.
pub(crate) fn basic_header(user: &str, pass: &str) -> String {
    format!("Basic {}", base64(format!("{user}:{pass}").as_bytes()))
}

pub(crate) fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(A[(n >> 18) as usize & 63] as char);
        out.push(A[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 {
            A[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if chunk.len() > 2 {
            A[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

/// Percent-encode a query value (RFC 3986 unreserved kept).
pub(crate) fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The token of a token server's JSON answer (`token`, else `access_token`).
pub(crate) fn parse_token_response(body: &[u8]) -> Result<String, String> {
    #[derive(serde::Deserialize)]
    struct T {
        #[serde(default)]
        token: Option<String>,
        #[serde(default)]
        access_token: Option<String>,
    }
    let t: T = serde_json::from_slice(body).map_err(|e| format!("bad token response: {e}"))?;
    t.token
        .filter(|s| !s.is_empty())
        .or(t.access_token.filter(|s| !s.is_empty()))
        .ok_or_else(|| "token response has no token".to_owned())
}

/// Authentication state of one pull: the header to send to the registry,
/// and bearer tokens cached per realm/service/scope.
#[derive(Default)]
pub(crate) struct AuthState {
    pub credentials: Option<(String, String)>,
    /// `Authorization` value sent with every registry request.
    pub header: Option<String>,
    tokens: HashMap<String, String>,
}

impl AuthState {
    pub fn new(credentials: Option<(String, String)>) -> AuthState {
        AuthState {
            credentials,
            ..AuthState::default()
        }
    }

    pub fn cache_key(realm: &str, service: Option<&str>, scope: Option<&str>) -> String {
        format!(
            "{realm}\n{}\n{}",
            service.unwrap_or(""),
            scope.unwrap_or("")
        )
    }

    pub fn cached(&self, key: &str) -> Option<&String> {
        self.tokens.get(key)
    }

    pub fn store(&mut self, key: String, header: String) {
        self.tokens.insert(key, header);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_hub_challenge() {
        let c = parse_challenges(
            r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/debian:pull""#,
        );
        assert_eq!(
            c,
            vec![Challenge::Bearer {
                realm: "https://auth.docker.io/token".into(),
                service: Some("registry.docker.io".into()),
                scope: Some("repository:library/debian:pull".into()),
            }]
        );
    }

    #[test]
    fn quoted_commas_escapes_and_several_challenges() {
        let c = parse_challenges(
            r#"Basic realm="Registry \"x\"", Bearer realm="http://127.0.0.1:1/t", scope="repository:a/b:pull,push", error="invalid_token""#,
        );
        assert_eq!(c.len(), 2, "{c:?}");
        assert_eq!(c[0], Challenge::Basic);
        assert_eq!(
            c[1],
            Challenge::Bearer {
                realm: "http://127.0.0.1:1/t".into(),
                service: None,
                scope: Some("repository:a/b:pull,push".into()),
            }
        );
        assert_eq!(parse_challenges("basic"), vec![Challenge::Basic]);
        assert_eq!(
            parse_challenges("Negotiate abc=="),
            vec![Challenge::Other("Negotiate".into())]
        );
        assert_eq!(parse_challenges(""), vec![]);
        assert_eq!(
            parse_challenges("Bearer service=x"),
            vec![Challenge::Other("Bearer".into())]
        );
        // garbage terminates
        let _ = parse_challenges("\"\"\"===,,, \u{7f}");
    }

    #[test]
    fn encoders() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foob"), "Zm9vYg==");
        assert_eq!(
            basic_header("Aladdin", "open sesame"),
            "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
        assert_eq!(
            percent_encode("repository:a/b:pull"),
            "repository%3Aa%2Fb%3Apull"
        );
    }

    #[test]
    fn token_responses() {
        assert_eq!(
            parse_token_response(br#"{"token":"a","expires_in":300}"#).unwrap(),
            "a"
        );
        assert_eq!(
            parse_token_response(br#"{"access_token":"b"}"#).unwrap(),
            "b"
        );
        assert_eq!(
            parse_token_response(br#"{"token":"","access_token":"c"}"#).unwrap(),
            "c"
        );
        assert!(parse_token_response(br#"{}"#).is_err());
        assert!(parse_token_response(b"nope").is_err());
    }
}
