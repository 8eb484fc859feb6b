//! Layer compression: gzip, zstd or none, told apart by magic bytes; xz
//! and bzip2 refused by name.

use std::io::{self, BufRead, Read};

/// How a layer blob is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b];
const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];

fn classify(head: &[u8]) -> Compression {
    if head.starts_with(GZIP_MAGIC) {
        Compression::Gzip
    } else if head.starts_with(ZSTD_MAGIC) {
        Compression::Zstd
    } else {
        Compression::None
    }
}

/// The compression of the stream `r`, from its magic bytes, without
/// consuming anything. It looks only at what `fill_buf` has buffered: a
/// fresh `BufReader` holds the start; [`decompress`] copes with short
/// buffers itself.
pub fn detect(r: &mut impl BufRead) -> io::Result<Compression> {
    Ok(classify(r.fill_buf()?))
}

/// A reader of the uncompressed tar in `r` (gzip, zstd or none, detected
/// from the magic bytes; concatenated gzip members and zstd frames are
/// read through). xz and bzip2 are refused by name.
pub fn decompress<'a>(mut r: impl BufRead + 'a) -> io::Result<Box<dyn BufRead + 'a>> {
    let buf = r.fill_buf()?;
    if buf.len() >= ZSTD_MAGIC.len() || buf.is_empty() {
        let compression = sniff(buf)?;
        return wrap(compression, r);
    }
    // Short buffer (a pipe, a nearly drained BufReader): take the first
    // bytes out and chain them back in front.
    let mut head = Vec::with_capacity(ZSTD_MAGIC.len());
    while head.len() < ZSTD_MAGIC.len() {
        let chunk = r.fill_buf()?;
        if chunk.is_empty() {
            break;
        }
        let n = chunk.len().min(ZSTD_MAGIC.len() - head.len());
        head.extend_from_slice(&chunk[..n]);
        r.consume(n);
    }
    let compression = sniff(&head)?;
    wrap(compression, io::Cursor::new(head).chain(r))
}

fn sniff(head: &[u8]) -> io::Result<Compression> {
    let unsupported = |what: &str| {
        io::Error::new(
            io::ErrorKind::Unsupported,
            format!("{what}-compressed layers are not supported (gzip, zstd or none)"),
        )
    };
    if head.starts_with(&[0xfd, b'7', b'z', b'X']) {
        return Err(unsupported("xz"));
    }
    if head.starts_with(b"BZh") {
        return Err(unsupported("bzip2"));
    }
    Ok(classify(head))
}

/// Buffer between a decompressor and the unpacker (file data is written
/// straight from it).
const DECOMPRESSED_BUF: usize = 256 << 10;

fn wrap<'a>(compression: Compression, r: impl BufRead + 'a) -> io::Result<Box<dyn BufRead + 'a>> {
    Ok(match compression {
        Compression::None => Box::new(r),
        Compression::Gzip => Box::new(io::BufReader::with_capacity(
            DECOMPRESSED_BUF,
            flate2::bufread::MultiGzDecoder::new(r),
        )),
        Compression::Zstd => Box::new(io::BufReader::with_capacity(
            DECOMPRESSED_BUF,
            zstd::stream::read::Decoder::with_buffer(r)?,
        )),
    })
}
