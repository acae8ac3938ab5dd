//! Reading input files with a size limit: snapshots, scenarios, `broker.conf` files and values given on the
//! command line are read through [`read_file`], which stops after [`MAX_INPUT_BYTES`], so that a huge file
//! or an endless one (`/dev/zero`, a pipe that never ends) is an error instead of unbounded memory and time.

use std::io::Read;
use std::path::Path;

/// The most loadmgr reads from one input file or from standard input: 64 MiB (a load-data snapshot of
/// 10,000 brokers is a few MiB).
pub const MAX_INPUT_BYTES: u64 = 64 << 20;

/// An input that could not be read, or was too large.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot read {what}: {reason}")]
pub struct InputError {
    /// The file, or `standard input`.
    pub what: String,
    /// Why: the OS error, or the limit it went over.
    pub reason: String,
}

/// Reads `reader` to its end, or fails once it has given more than `limit` bytes; `what` names the input
/// in errors.
pub fn read_limited(reader: impl Read, what: &str, limit: u64) -> Result<Vec<u8>, InputError> {
    let error = |reason: String| InputError {
        what: what.to_owned(),
        reason,
    };
    let mut buf = Vec::new();
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| error(e.to_string()))?;
    if buf.len() as u64 > limit {
        return Err(error(format!(
            "larger than the input limit of {}",
            limit_text(limit)
        )));
    }
    Ok(buf)
}

/// Reads a file of at most [`MAX_INPUT_BYTES`]; errors name the file.
pub fn read_file(path: &Path) -> Result<Vec<u8>, InputError> {
    let what = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| InputError {
        what: what.clone(),
        reason: e.to_string(),
    })?;
    read_limited(file, &what, MAX_INPUT_BYTES)
}

/// [`read_file`] for UTF-8 text.
pub fn read_file_to_string(path: &Path) -> Result<String, InputError> {
    String::from_utf8(read_file(path)?).map_err(|_| InputError {
        what: path.display().to_string(),
        reason: "not UTF-8 text".into(),
    })
}

fn limit_text(n: u64) -> String {
    if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{} MiB ({n} bytes)", n >> 20)
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_longer_than_the_limit_is_an_error_naming_it() {
        assert_eq!(read_limited(&b"abcd"[..], "x", 4).unwrap(), b"abcd");
        let e = read_limited(std::io::repeat(0), "/dev/zero", MAX_INPUT_BYTES).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot read /dev/zero: larger than the input limit of 64 MiB (67108864 bytes)"
        );
        let e = read_limited(&b"abcde"[..], "x", 4).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot read x: larger than the input limit of 4 bytes"
        );
    }

    #[test]
    fn files_are_read_with_the_limit() {
        let e = read_file(Path::new("/nonexistent/x.json"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("cannot read /nonexistent/x.json: "), "{e}");
        #[cfg(unix)]
        {
            let e = read_file(Path::new("/dev/zero")).unwrap_err().to_string();
            assert!(e.contains("larger than the input limit of 64 MiB"), "{e}");
        }
    }
}
