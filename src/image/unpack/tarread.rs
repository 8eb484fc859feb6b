//! Reading a layer's tar stream: one header at a time, with the extension
//! records that describe it folded in, and its data left in the stream for
//! the caller to copy straight out of the buffer (or to be skipped).
//!
//! Formats: POSIX ustar (the name prefix), GNU (long names and links,
//! old-style sparse maps), PAX (`x` records: `path`, `linkpath`, `size`,
//! `uid`, `gid`, `mtime`, `SCHILY.xattr.*`), and v7. Numbers may be octal
//! or base-256; a blank number field reads as 0, as GNU tar and Go read it.
//! The header checksum is checked (the unsigned sum, or the signed one old
//! writers made).
//!
//! Hostile input: the extension headers and records of one entry may take
//! at most `META_MAX` bytes, so a layer cannot make the reader hold much
//! memory; every length is checked before it is used; a stream that ends
//! inside a header, an extension or data is reported as truncated.

use std::io::{self, BufRead};

/// Bytes of a tar header block.
const BLOCK: u64 = 512;

/// Why reading the stream failed.
#[derive(Debug)]
pub(super) enum TarError {
    /// The stream ended inside the thing named.
    Truncated(&'static str),
    /// Not a valid tar stream; says what is wrong.
    Bad(String),
    /// One entry's extension headers are larger than the limit.
    TooLarge,
    Io(io::Error),
}

impl From<io::Error> for TarError {
    fn from(e: io::Error) -> Self {
        TarError::Io(e)
    }
}

fn bad(why: impl Into<String>) -> TarError {
    TarError::Bad(why.into())
}

/// An old-style GNU sparse file: where its stored data goes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Sparse {
    /// The file's length, holes included.
    pub real_size: u64,
    /// (offset in the file, length) of each stored piece, in stream order:
    /// ascending and not overlapping.
    pub map: Vec<(u64, u64)>,
}

/// One entry: its header with what extension records said of it.
#[derive(Debug, Default)]
pub(super) struct Entry {
    /// The type flag byte.
    pub kind: u8,
    pub name: Vec<u8>,
    /// Symlink or hard link target; empty when there is none.
    pub link: Vec<u8>,
    /// Data bytes that follow in the stream (a sparse file's stored bytes).
    pub size: u64,
    pub mode: u64,
    pub uid: u64,
    pub gid: u64,
    /// Seconds and nanoseconds.
    pub mtime: (i64, u32),
    /// `SCHILY.xattr.*` records: (name, value).
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// PAX `GNU.sparse.*` records were present (a sparse format this
    /// reader does not lay out).
    pub pax_sparse: bool,
    /// For type `S`.
    pub sparse: Option<Sparse>,
}

/// The PAX records of an `x` header, as they apply to the next entry.
#[derive(Default)]
struct Pax {
    path: Option<Vec<u8>>,
    link: Option<Vec<u8>>,
    size: Option<u64>,
    uid: Option<u64>,
    gid: Option<u64>,
    mtime: Option<(i64, u32)>,
    xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    sparse: bool,
}

pub(super) struct TarReader<R> {
    src: R,
    /// Bytes consumed from `src`.
    pos: u64,
    /// Data of the current entry not taken yet, and its padding after it.
    data_left: u64,
    pad_left: u64,
    /// Whether the end-of-archive marker was read.
    ended: bool,
    /// Extension bytes one entry may have.
    meta_max: u64,
    block: [u8; BLOCK as usize],
}

impl<R: BufRead> TarReader<R> {
    pub(super) fn new(src: R, meta_max: u64) -> Self {
        TarReader {
            src,
            pos: 0,
            data_left: 0,
            pad_left: 0,
            ended: false,
            meta_max,
            block: [0; BLOCK as usize],
        }
    }

    /// Bytes read from the stream so far.
    pub(super) fn position(&self) -> u64 {
        self.pos
    }

    /// Reads the next entry into `e`. `false` at the end-of-archive marker,
    /// and at the end of the stream: [`Self::saw_end_marker`] tells which.
    pub(super) fn next(&mut self, e: &mut Entry) -> Result<bool, TarError> {
        self.skip_rest()?;
        let mut long_name: Option<Vec<u8>> = None;
        let mut long_link: Option<Vec<u8>> = None;
        let mut pax: Option<Pax> = None;
        let mut budget = self.meta_max;
        let mut described = false;
        loop {
            if !self.read_header(described)? {
                if described {
                    return Err(bad("extension headers at the end describe no entry"));
                }
                return Ok(false);
            }
            budget = budget.checked_sub(BLOCK).ok_or(TarError::TooLarge)?;
            let h = &self.block;
            let kind = h[156];
            let size = number(&h[124..136]).map_err(|w| bad(format!("size field: {w}")))?;
            match kind {
                b'L' | b'K' | b'x' => {
                    let padded = round_block(size);
                    if padded > budget {
                        return Err(TarError::TooLarge);
                    }
                    budget -= padded;
                    let data = self.read_ext(size)?;
                    described = true;
                    match kind {
                        b'L' if long_name.is_some() => {
                            return Err(bad("two GNU long names for one entry"))
                        }
                        b'L' => long_name = Some(strip_nul(data)),
                        b'K' if long_link.is_some() => {
                            return Err(bad("two GNU long link names for one entry"))
                        }
                        b'K' => long_link = Some(strip_nul(data)),
                        _ if pax.is_some() => return Err(bad("two PAX headers for one entry")),
                        _ => pax = Some(parse_pax(&data)?),
                    }
                    continue;
                }
                _ => {}
            }
            let pax = pax.unwrap_or_default();
            self.fill(e, kind, size, long_name, long_link, pax)?;
            if kind == b'S' {
                e.sparse = Some(self.sparse_map(e.size, &mut budget)?);
            }
            self.data_left = e.size;
            self.pad_left = pad_after(e.size);
            return Ok(true);
        }
    }

    /// Whether the stream had its end-of-archive marker (after `next` gave
    /// `false`).
    pub(super) fn saw_end_marker(&self) -> bool {
        self.ended
    }

    /// The current entry's data not taken yet, as much of it as is
    /// buffered: empty at its end, or where the stream ends early.
    pub(super) fn data(&mut self) -> io::Result<&[u8]> {
        if self.data_left == 0 {
            return Ok(&[]);
        }
        let left = usize::try_from(self.data_left).unwrap_or(usize::MAX);
        let buf = self.fill_buf()?;
        Ok(&buf[..buf.len().min(left)])
    }

    /// Marks `n` bytes of what [`Self::data`] gave as taken.
    pub(super) fn consume_data(&mut self, n: usize) {
        debug_assert!(n as u64 <= self.data_left);
        self.src.consume(n);
        self.data_left -= n as u64;
        self.pos += n as u64;
    }

    /// Reads the rest of the stream after the end marker (record padding,
    /// the second zero block), at most `max` bytes of it, so that whatever
    /// checks the stream below (a gzip trailer, a digest) sees it all.
    pub(super) fn finish(mut self, max: u64) -> Result<(), TarError> {
        self.skip(max)?;
        if !self.fill_buf()?.is_empty() {
            return Err(bad("too much data after the end-of-archive marker"));
        }
        Ok(())
    }

    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        fill(&mut self.src)
    }

    /// Skips up to `n` bytes without copying them; how many there were.
    fn skip(&mut self, n: u64) -> io::Result<u64> {
        let mut left = n;
        while left > 0 {
            let avail = self.fill_buf()?.len();
            if avail == 0 {
                break;
            }
            let k = avail.min(usize::try_from(left).unwrap_or(usize::MAX));
            self.src.consume(k);
            self.pos += k as u64;
            left -= k as u64;
        }
        Ok(n - left)
    }

    /// Skips what is left of the current entry: data, then padding.
    fn skip_rest(&mut self) -> Result<(), TarError> {
        let (data, pad) = (self.data_left, self.pad_left);
        self.data_left = 0;
        self.pad_left = 0;
        if self.skip(data)? < data || self.skip(pad)? < pad {
            return Err(TarError::Truncated("the data of the previous entry"));
        }
        Ok(())
    }

    /// Reads a header block into `self.block` and checks it. `false` at
    /// the end marker (a zero block) or at the end of the stream, which is
    /// only allowed between entries.
    fn read_header(&mut self, described: bool) -> Result<bool, TarError> {
        let got = read_exact_or_count(&mut self.src, &mut self.pos, &mut self.block)?;
        if got == 0 && !described {
            return Ok(false);
        }
        if got < self.block.len() {
            return Err(TarError::Truncated("a header"));
        }
        let block = &self.block;
        if is_zero(block) {
            self.ended = true;
            return Ok(false);
        }
        let stored = number(&block[148..156]).map_err(|w| bad(format!("checksum field: {w}")))?;
        let (unsigned, signed) = checksums(block);
        if stored != unsigned && stored as i64 != signed {
            return Err(bad("archive header checksum mismatch"));
        }
        Ok(true)
    }

    /// The `size` bytes of an extension entry, its padding skipped.
    fn read_ext(&mut self, size: u64) -> Result<Vec<u8>, TarError> {
        let len = usize::try_from(size).map_err(|_| TarError::TooLarge)?;
        let mut data = vec![0u8; len];
        let got = read_exact_or_count(&mut self.src, &mut self.pos, &mut data)?;
        let pad = pad_after(size);
        if got < len || self.skip(pad)? < pad {
            return Err(TarError::Truncated("an extension header"));
        }
        Ok(data)
    }

    /// Fills `e` from the header in `self.block` and its extensions.
    fn fill(
        &self,
        e: &mut Entry,
        kind: u8,
        size: u64,
        long_name: Option<Vec<u8>>,
        long_link: Option<Vec<u8>>,
        pax: Pax,
    ) -> Result<(), TarError> {
        let h = &self.block;
        let field = |r: std::ops::Range<usize>, what: &str| {
            number(&h[r]).map_err(|w| bad(format!("{what} field: {w}")))
        };
        e.kind = kind;
        e.mode = field(100..108, "mode")?;
        e.uid = match pax.uid {
            Some(v) => v,
            None => field(108..116, "uid")?,
        };
        e.gid = match pax.gid {
            Some(v) => v,
            None => field(116..124, "gid")?,
        };
        e.mtime = match pax.mtime {
            Some(t) => t,
            None => {
                let secs = field(136..148, "mtime")?;
                (i64::try_from(secs).unwrap_or(i64::MAX), 0)
            }
        };
        e.size = pax.size.unwrap_or(size);
        e.name.clear();
        match (long_name, pax.path) {
            (Some(n), _) | (None, Some(n)) => e.name.extend_from_slice(&n),
            (None, None) => {
                let ustar = &h[257..263] == b"ustar\0" && &h[263..265] == b"00";
                let prefix = if ustar { cut(&h[345..500]) } else { &[] };
                if !prefix.is_empty() {
                    e.name.extend_from_slice(prefix);
                    e.name.push(b'/');
                }
                e.name.extend_from_slice(cut(&h[..100]));
            }
        }
        e.link.clear();
        match (long_link, pax.link) {
            (Some(n), _) | (None, Some(n)) => e.link.extend_from_slice(&n),
            (None, None) => e.link.extend_from_slice(cut(&h[157..257])),
        }
        e.xattrs = pax.xattrs;
        e.pax_sparse = pax.sparse;
        e.sparse = None;
        Ok(())
    }

    /// The map of an old-style GNU sparse entry (type `S`): four pieces in
    /// the header, 21 in each extension block that follows it. `stored` is
    /// the entry's data size, which the pieces must add up to.
    fn sparse_map(&mut self, stored: u64, budget: &mut u64) -> Result<Sparse, TarError> {
        let real_size =
            number(&self.block[483..495]).map_err(|w| bad(format!("sparse real size: {w}")))?;
        let mut map = Vec::new();
        let mut end = 0u64;
        let mut total = 0u64;
        let mut add = |piece: &[u8]| -> Result<(), TarError> {
            // An unused slot (a NUL where a number starts), as GNU tar
            // marks them.
            if piece[0] == 0 || piece[12] == 0 {
                return Ok(());
            }
            let off = number(&piece[..12]).map_err(|w| bad(format!("sparse offset: {w}")))?;
            let len = number(&piece[12..24]).map_err(|w| bad(format!("sparse length: {w}")))?;
            if off < end {
                return Err(bad("sparse pieces out of order or overlapping"));
            }
            end = off
                .checked_add(len)
                .ok_or_else(|| bad("sparse piece past the largest file size"))?;
            total = total
                .checked_add(len)
                .filter(|t| *t <= stored)
                .ok_or_else(|| bad("sparse pieces hold more data than the entry"))?;
            map.push((off, len));
            Ok(())
        };
        for piece in self.block[386..482].chunks_exact(24) {
            add(piece)?;
        }
        let mut extended = self.block[482] == 1;
        while extended {
            *budget = budget.checked_sub(BLOCK).ok_or(TarError::TooLarge)?;
            let mut ext = [0u8; BLOCK as usize];
            if read_exact_or_count(&mut self.src, &mut self.pos, &mut ext)? < ext.len() {
                return Err(TarError::Truncated("a sparse map"));
            }
            for piece in ext[..504].chunks_exact(24) {
                add(piece)?;
            }
            extended = ext[504] == 1;
        }
        if end != real_size || total != stored {
            return Err(bad("sparse map does not match the sizes in the header"));
        }
        Ok(Sparse { real_size, map })
    }
}

/// `src`'s buffer, refilled if empty; interruptions retried.
fn fill<R: BufRead>(src: &mut R) -> io::Result<&[u8]> {
    loop {
        match src.fill_buf() {
            // Asked again, for the borrow checker: a full buffer is
            // returned as it is, with no read.
            Ok(_) => return src.fill_buf(),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Reads exactly `out.len()` bytes from `src`, counting them into `pos`;
/// how many there were if the stream ended first.
fn read_exact_or_count<R: BufRead>(
    src: &mut R,
    pos: &mut u64,
    out: &mut [u8],
) -> io::Result<usize> {
    let mut got = 0;
    while got < out.len() {
        let buf = fill(src)?;
        if buf.is_empty() {
            break;
        }
        let n = buf.len().min(out.len() - got);
        out[got..got + n].copy_from_slice(&buf[..n]);
        src.consume(n);
        got += n;
    }
    *pos += got as u64;
    Ok(got)
}

/// `n` rounded up to whole blocks; saturating, as `n` comes from the layer.
fn round_block(n: u64) -> u64 {
    n.saturating_add(BLOCK - 1) & !(BLOCK - 1)
}

/// Padding after `n` bytes of data, to the next block.
fn pad_after(n: u64) -> u64 {
    (BLOCK - n % BLOCK) % BLOCK
}

/// A header text field: up to its first NUL.
fn cut(field: &[u8]) -> &[u8] {
    let end = field.iter().position(|b| *b == 0).unwrap_or(field.len());
    &field[..end]
}

/// A GNU long name's data: one terminating NUL dropped (any other NUL
/// stays, for the name check to refuse).
fn strip_nul(mut v: Vec<u8>) -> Vec<u8> {
    if v.last() == Some(&0) {
        v.pop();
    }
    v
}

fn is_zero(block: &[u8; BLOCK as usize]) -> bool {
    block.chunks_exact(8).fold(0u64, |acc, w| {
        acc | u64::from_ne_bytes(w.try_into().expect("8 bytes"))
    }) == 0
}

/// The header's checksums, unsigned and signed, with the checksum field
/// counted as spaces.
fn checksums(block: &[u8; BLOCK as usize]) -> (u64, i64) {
    // Whole-block sums (no per-byte test, so they vectorise), then the
    // field's own bytes swapped for spaces.
    let unsigned: u64 = block.iter().map(|&b| u64::from(b)).sum();
    let signed: i64 = block.iter().map(|&b| i64::from(b as i8)).sum();
    let field = &block[148..156];
    let f_unsigned: u64 = field.iter().map(|&b| u64::from(b)).sum();
    let f_signed: i64 = field.iter().map(|&b| i64::from(b as i8)).sum();
    let spaces = 8 * u64::from(b' ');
    (
        unsigned - f_unsigned + spaces,
        signed - f_signed + spaces as i64,
    )
}

/// A numeric header field: base-256 when its first byte has the high bit
/// set, else octal up to the first NUL, blanks around it ignored; a blank
/// field is 0.
fn number(field: &[u8]) -> Result<u64, String> {
    let Some(&first) = field.first() else {
        return Ok(0);
    };
    if first & 0x80 != 0 {
        if first & 0x40 != 0 {
            return Err("negative base-256 number".into());
        }
        let mut n = u64::from(first & 0x3f);
        for &b in &field[1..] {
            if n >> 56 != 0 {
                return Err("base-256 number too large".into());
            }
            n = n << 8 | u64::from(b);
        }
        return Ok(n);
    }
    let digits = cut(field).trim_ascii();
    let mut n = 0u64;
    for &d in digits {
        if !(b'0'..=b'7').contains(&d) {
            return Err(format!(
                "{:?} is not an octal number",
                String::from_utf8_lossy(field)
            ));
        }
        if n >> 61 != 0 {
            return Err("octal number too large".into());
        }
        n = n << 3 | u64::from(d - b'0');
    }
    Ok(n)
}

/// The records of a PAX extended header: `LEN KEY=VALUE\n`, LEN counting
/// the whole record.
fn parse_pax(mut data: &[u8]) -> Result<Pax, TarError> {
    let mut pax = Pax::default();
    let malformed = || bad("malformed PAX record");
    while !data.is_empty() {
        // Some writers pad the header's data with NULs.
        if data.iter().all(|b| *b == 0) {
            break;
        }
        let sp = data.iter().position(|b| *b == b' ').ok_or_else(malformed)?;
        let len = decimal(&data[..sp])
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(malformed)?;
        if len <= sp + 1 || len > data.len() || data[len - 1] != b'\n' {
            return Err(malformed());
        }
        let kv = &data[sp + 1..len - 1];
        data = &data[len..];
        let eq = kv.iter().position(|b| *b == b'=').ok_or_else(malformed)?;
        let (key, value) = (&kv[..eq], &kv[eq + 1..]);
        let number = |what: &str| {
            decimal(value).ok_or_else(|| bad(format!("PAX {what} record is not a number")))
        };
        match key {
            b"path" => pax.path = Some(value.to_vec()),
            b"linkpath" => pax.link = Some(value.to_vec()),
            b"size" => pax.size = Some(number("size")?),
            b"uid" => pax.uid = Some(number("uid")?),
            b"gid" => pax.gid = Some(number("gid")?),
            b"mtime" => {
                // An unreadable time is ignored (the header's stands), as
                // other unpackers do.
                if let Some(t) = parse_pax_time(value) {
                    pax.mtime = Some(t);
                }
            }
            _ => {
                if let Some(x) = key.strip_prefix(b"SCHILY.xattr.") {
                    pax.xattrs.push((x.to_vec(), value.to_vec()));
                } else if key.starts_with(b"GNU.sparse.") {
                    pax.sparse = true;
                }
            }
        }
    }
    Ok(pax)
}

/// A non-empty run of ASCII digits as a number; `None` for anything else
/// or on overflow.
fn decimal(v: &[u8]) -> Option<u64> {
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// A PAX time (`[-]seconds[.fraction]`) as seconds and nanoseconds.
fn parse_pax_time(v: &[u8]) -> Option<(i64, u32)> {
    let (neg, v) = match v.strip_prefix(b"-") {
        Some(rest) => (true, rest),
        None => (false, v),
    };
    let (secs, frac) = match v.iter().position(|b| *b == b'.') {
        Some(dot) => (&v[..dot], &v[dot + 1..]),
        None => (v, &[][..]),
    };
    let secs = i64::try_from(decimal(secs)?).ok()?;
    if !frac.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut nanos: u32 = 0;
    for (i, d) in frac.iter().take(9).enumerate() {
        nanos += u32::from(*d - b'0') * 10u32.pow(8 - i as u32);
    }
    if !neg {
        return Some((secs, nanos));
    }
    // -1.25 is 1.25 s before the epoch: -2 s plus 0.75 s.
    Some(if nanos == 0 {
        (-secs, 0)
    } else {
        (-secs - 1, 1_000_000_000 - nanos)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header block: `name`, type `kind`, `size`; ustar magic unless
    /// `gnu`. `edit` may change any byte before the checksum is set.
    fn header(
        name: &[u8],
        kind: u8,
        size: u64,
        gnu: bool,
        edit: impl FnOnce(&mut [u8]),
    ) -> Vec<u8> {
        let mut h = vec![0u8; 512];
        h[..name.len()].copy_from_slice(name);
        h[100..108].copy_from_slice(b"0000644\0");
        h[108..116].copy_from_slice(b"0001750\0");
        h[116..124].copy_from_slice(b"0001751\0");
        h[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
        h[136..148].copy_from_slice(b"14712345670\0");
        h[156] = kind;
        if gnu {
            h[257..265].copy_from_slice(b"ustar  \0");
        } else {
            h[257..265].copy_from_slice(b"ustar\x0000");
        }
        edit(&mut h);
        let (sum, _) = checksums(h[..].try_into().unwrap());
        h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        h
    }

    /// `data` padded to whole blocks.
    fn padded(data: &[u8]) -> Vec<u8> {
        let mut v = data.to_vec();
        v.resize(round_block(data.len() as u64) as usize, 0);
        v
    }

    fn end() -> Vec<u8> {
        vec![0u8; 1024]
    }

    fn pax_record(key: &str, value: &[u8]) -> Vec<u8> {
        // The length counts its own digits: settle it by trying.
        let rest = key.len() + value.len() + 3;
        let mut len = rest + 1;
        while len != rest + len.to_string().len() {
            len = rest + len.to_string().len();
        }
        let mut r = format!("{len} {key}=").into_bytes();
        r.extend_from_slice(value);
        r.push(b'\n');
        r
    }

    /// (type, name, data) of each entry.
    type Listed = Vec<(u8, Vec<u8>, Vec<u8>)>;

    fn entries(tar: &[u8]) -> Result<Listed, TarError> {
        let mut rd = TarReader::new(tar, 1 << 20);
        let mut e = Entry::default();
        let mut out = Vec::new();
        while rd.next(&mut e)? {
            let mut data = Vec::new();
            loop {
                let d = rd.data()?;
                if d.is_empty() {
                    break;
                }
                let n = d.len().min(7);
                data.extend_from_slice(&d[..n]);
                rd.consume_data(n);
            }
            out.push((e.kind, e.name.clone(), data));
        }
        assert!(rd.saw_end_marker());
        let len = tar.len() as u64;
        assert!(rd.position() <= len);
        rd.finish(1 << 20)?;
        Ok(out)
    }

    #[test]
    fn numbers_octal_base256_and_blank() {
        assert_eq!(number(b"0000644\0"), Ok(0o644));
        assert_eq!(number(b" 644 \0\0\0"), Ok(0o644));
        assert_eq!(number(b"644\0junk"), Ok(0o644));
        assert_eq!(number(b"\0\0\0\0\0\0\0\0"), Ok(0));
        assert_eq!(number(b"       \0"), Ok(0));
        assert_eq!(number(b"12345670"), Ok(0o12345670));
        assert_eq!(number(b"777777777777777777777"), Ok(u64::MAX >> 1));
        assert!(number(b"7777777777777777777777").is_err());
        assert!(number(b"0009\0\0\0\0").is_err());
        assert!(number(b"0000 644").is_err());
        assert!(number(b"+644\0\0\0\0").is_err());
        assert_eq!(number(&[0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2]), Ok(0x102));
        assert_eq!(
            number(&[0x80, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            Ok(u64::MAX)
        );
        assert!(number(&[0x80, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(number(&[0xff; 12]).is_err());
    }

    #[test]
    fn pax_records_by_length_not_by_line() {
        let mut data = pax_record("path", b"a\nb");
        data.extend(pax_record("size", b"12"));
        data.extend(pax_record("uid", b"70000"));
        data.extend(pax_record("mtime", b"-1.25"));
        data.extend(pax_record("SCHILY.xattr.user.k", b"v=1"));
        data.extend(pax_record("atime", b"5"));
        data.extend([0u8; 7]);
        let p = parse_pax(&data).unwrap();
        assert_eq!(p.path.as_deref(), Some(&b"a\nb"[..]));
        assert_eq!((p.size, p.uid, p.gid), (Some(12), Some(70000), None));
        assert_eq!(p.mtime, Some((-2, 750_000_000)));
        assert_eq!(p.xattrs, [(b"user.k".to_vec(), b"v=1".to_vec())]);
        assert!(!p.sparse);
        assert!(
            parse_pax(&pax_record("GNU.sparse.map", b"0,1"))
                .unwrap()
                .sparse
        );
        for bad_data in [
            &b"9 path=ab"[..], // no newline at its end
            b"99 path=ab\n",   // longer than the data
            b"3 p\n",          // no `=`
            b"x path=a\n",     // length not a number
            b"path=a\n",       // no length
            b"2 \n",           // length inside its own digits
        ] {
            assert!(
                parse_pax(bad_data).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad_data)
            );
        }
        assert!(parse_pax(&pax_record("size", b"12x")).is_err());
        assert!(parse_pax(&pax_record("uid", b"")).is_err());
    }

    #[test]
    fn names_from_prefix_long_names_and_pax() {
        let mut t = header(b"file", b'0', 3, false, |h| {
            h[345..348].copy_from_slice(b"dir")
        });
        t.extend(padded(b"abc"));
        // GNU magic: the prefix area is not a prefix.
        t.extend(header(b"gnu", b'5', 0, true, |h| {
            h[345..348].copy_from_slice(b"xyz")
        }));
        let long = vec![b'n'; 300];
        let mut l = long.clone();
        l.push(0);
        t.extend(header(b"././@LongLink", b'L', l.len() as u64, true, |_| {}));
        t.extend(padded(&l));
        t.extend(header(b"short", b'2', 0, true, |h| {
            h[157..160].copy_from_slice(b"tgt")
        }));
        let mut pax = pax_record("path", b"from/pax");
        pax.extend(pax_record("linkpath", b"to/pax"));
        t.extend(header(
            b"PaxHeaders/x",
            b'x',
            pax.len() as u64,
            false,
            |_| {},
        ));
        t.extend(padded(&pax));
        t.extend(header(b"hdr", b'1', 0, false, |h| {
            h[157..160].copy_from_slice(b"old")
        }));
        t.extend(end());
        let mut rd = TarReader::new(&t[..], 1 << 20);
        let mut e = Entry::default();
        let mut got = Vec::new();
        while rd.next(&mut e).unwrap() {
            got.push((
                e.kind,
                e.name.clone(),
                e.link.clone(),
                e.size,
                e.mode,
                e.uid,
            ));
        }
        assert_eq!(
            got,
            [
                (b'0', b"dir/file".to_vec(), vec![], 3, 0o644, 0o1750),
                (b'5', b"gnu".to_vec(), vec![], 0, 0o644, 0o1750),
                (b'2', long, b"tgt".to_vec(), 0, 0o644, 0o1750),
                (
                    b'1',
                    b"from/pax".to_vec(),
                    b"to/pax".to_vec(),
                    0,
                    0o644,
                    0o1750
                ),
            ]
        );
    }

    #[test]
    fn data_is_handed_out_within_the_entry_and_skipped_when_left() {
        let mut t = header(b"a", b'0', 700, false, |_| {});
        t.extend(padded(&[b'a'; 700]));
        t.extend(header(b"b", b'0', 5, false, |_| {}));
        t.extend(padded(b"bbbbb"));
        t.extend(end());
        let got = entries(&t).unwrap();
        assert_eq!(got[0].2, vec![b'a'; 700]);
        assert_eq!(got[1], (b'0', b"b".to_vec(), b"bbbbb".to_vec()));
        // Left unread, the data is skipped.
        let mut rd = TarReader::new(&t[..], 1 << 20);
        let mut e = Entry::default();
        assert!(rd.next(&mut e).unwrap());
        assert!(rd.next(&mut e).unwrap());
        assert_eq!(e.name, b"b");
        assert_eq!(rd.data().unwrap(), b"bbbbb");
    }

    #[test]
    fn checksums_signed_and_unsigned_and_damage() {
        // Against another implementation: the tar crate's.
        let mut h = tar::Header::new_gnu();
        h.set_path("\u{e9}t\u{e9}/f").unwrap();
        h.set_size(12345);
        h.set_cksum();
        let block: &[u8; 512] = h.as_bytes();
        assert_eq!(checksums(block).0, number(&block[148..156]).unwrap());
        // Ours, with a name byte with the high bit set: the signed sum
        // differs, and either is accepted.
        let mut h = header(b"\xe9t\xe9", b'0', 0, false, |_| {});
        let mut t = h.clone();
        t.extend(end());
        assert_eq!(entries(&t).unwrap().len(), 1);
        let (_, signed) = checksums(h[..].try_into().unwrap());
        h[148..156].copy_from_slice(format!("{signed:06o}\0 ").as_bytes());
        let mut t = h.clone();
        t.extend(end());
        assert_eq!(entries(&t).unwrap().len(), 1);
        h[5] ^= 1;
        let mut t = h;
        t.extend(end());
        assert!(matches!(entries(&t), Err(TarError::Bad(m)) if m.contains("checksum")));
    }

    #[test]
    fn extension_headers_are_bounded_and_must_describe_an_entry() {
        // Two long names for one entry.
        let mut t = Vec::new();
        for _ in 0..2 {
            t.extend(header(b"././@LongLink", b'L', 2, true, |_| {}));
            t.extend(padded(b"x\0"));
        }
        t.extend(header(b"f", b'0', 0, true, |_| {}));
        t.extend(end());
        assert!(matches!(entries(&t), Err(TarError::Bad(m)) if m.contains("two")));
        // A PAX header and then the end.
        let pax = pax_record("path", b"p");
        let mut t = header(b"x", b'x', pax.len() as u64, false, |_| {});
        t.extend(padded(&pax));
        t.extend(end());
        assert!(matches!(entries(&t), Err(TarError::Bad(m)) if m.contains("describe no entry")));
        // Larger than the budget, by size alone (nothing is read or held).
        let t = header(b"x", b'x', 2 << 20, false, |_| {});
        assert!(matches!(entries(&t), Err(TarError::TooLarge)));
        // Many small ones add up: the header blocks count too.
        let mut t = Vec::new();
        for _ in 0..3000 {
            let pax = pax_record("atime", b"1");
            t.extend(header(b"x", b'x', pax.len() as u64, false, |_| {}));
            t.extend(padded(&pax));
        }
        let mut rd = TarReader::new(&t[..], 1 << 20);
        // The second `x` is refused first: one per entry.
        assert!(matches!(
            rd.next(&mut Entry::default()),
            Err(TarError::Bad(_))
        ));
        let mut t = Vec::new();
        for _ in 0..3000 {
            t.extend(header(b"g", b'V', 0, false, |_| {}));
        }
        // Plain entries each have their own budget.
        let mut rd = TarReader::new(&t[..], 1 << 20);
        let mut e = Entry::default();
        for _ in 0..3000 {
            assert!(rd.next(&mut e).unwrap());
        }
        assert!(!rd.next(&mut e).unwrap());
        assert!(!rd.saw_end_marker());
    }

    #[test]
    fn truncation_is_reported_where_it_happens() {
        let mut t = header(b"a", b'0', 700, false, |_| {});
        t.extend(padded(&[b'a'; 700]));
        t.extend(end());
        let cut = |n: usize| {
            let mut rd = TarReader::new(&t[..n], 1 << 20);
            let mut e = Entry::default();
            let first = rd.next(&mut e);
            let second = rd.next(&mut e);
            (
                first.map_err(|e| format!("{e:?}")),
                second.map_err(|e| format!("{e:?}")),
            )
        };
        assert!(cut(100).0.unwrap_err().contains("a header"));
        assert!(cut(900)
            .1
            .unwrap_err()
            .contains("data of the previous entry"));
        // Cut between entries: no error, and no end marker.
        let mut rd = TarReader::new(&t[..1536], 1 << 20);
        let mut e = Entry::default();
        assert!(rd.next(&mut e).unwrap());
        assert!(!rd.next(&mut e).unwrap());
        assert!(!rd.saw_end_marker());
        // Inside an extension header's data.
        let pax = pax_record("path", &[b'p'; 600]);
        let mut t = header(b"x", b'x', pax.len() as u64, false, |_| {});
        t.extend(&pax[..300]);
        let mut rd = TarReader::new(&t[..], 1 << 20);
        assert!(matches!(
            rd.next(&mut Entry::default()),
            Err(TarError::Truncated("an extension header"))
        ));
    }

    /// A GNU sparse header with `pieces` (offset, length) in the header
    /// itself, `real` as its real size.
    fn sparse_header(pieces: &[(u64, u64)], stored: u64, real: u64, extended: bool) -> Vec<u8> {
        header(b"s", b'S', stored, true, |h| {
            for (i, (off, len)) in pieces.iter().enumerate() {
                let at = 386 + 24 * i;
                h[at..at + 12].copy_from_slice(format!("{off:011o}\0").as_bytes());
                h[at + 12..at + 24].copy_from_slice(format!("{len:011o}\0").as_bytes());
            }
            h[482] = u8::from(extended);
            h[483..495].copy_from_slice(format!("{real:011o}\0").as_bytes());
        })
    }

    #[test]
    fn sparse_maps_are_checked() {
        let read = |t: &[u8]| {
            let mut rd = TarReader::new(t, 1 << 20);
            let mut e = Entry::default();
            rd.next(&mut e).map(|_| e.sparse)
        };
        // A hole at the end: a last piece of nothing at the real size.
        let ok = sparse_header(&[(0, 512), (4096, 10), (8192, 0)], 522, 8192, false);
        assert_eq!(
            read(&ok).unwrap(),
            Some(Sparse {
                real_size: 8192,
                map: vec![(0, 512), (4096, 10), (8192, 0)]
            })
        );
        // Without it, the pieces end short of the real size.
        let short = sparse_header(&[(0, 512), (4096, 10)], 522, 8192, false);
        assert!(matches!(read(&short), Err(TarError::Bad(_))));
        // Continued in an extension block.
        let mut t = sparse_header(&[(0, 1)], 2, 100, true);
        let mut ext = vec![0u8; 512];
        ext[..12].copy_from_slice(b"00000000143\0");
        ext[12..24].copy_from_slice(b"00000000001\0");
        t.extend(&ext);
        assert_eq!(read(&t).unwrap().unwrap().map, [(0, 1), (99, 1)]);
        for (pieces, stored, real) in [
            (&[(100, 10), (50, 10)][..], 20, 200), // out of order
            (&[(0, 10), (5, 10)], 20, 200),        // overlapping
            (&[(0, 10)], 20, 200),                 // less data than stored
            (&[(0, 10), (20, 20)], 20, 200),       // more data than stored
            (&[(0, 10)], 10, 9),                   // past the real size
        ] {
            let t = sparse_header(pieces, stored, real, false);
            assert!(matches!(read(&t), Err(TarError::Bad(_))), "{pieces:?}");
        }
        // An extension block cut off.
        let t = sparse_header(&[(0, 1)], 1, 1, true);
        assert!(matches!(read(&t), Err(TarError::Truncated("a sparse map"))));
    }
}
