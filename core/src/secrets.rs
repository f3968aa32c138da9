//! Secrets on disk and Redis credentials: files only their owner may read, passwords
//! put into Redis URLs after parsing, and URLs redacted before they are shown.
//!
//! A password never goes on a command line or into the configuration file: it stays in
//! a file of mode 0600 (`redis_password_file`, `--redis-password-file`), and the URL
//! names only the user (`redis://seckill-node@10.0.0.5:6379`).

use std::path::Path;

/// Reads a file that holds a secret, refusing one that its group or others may read:
/// a secret copied with loose permissions is a secret shared with every local account.
pub fn read_private(path: &Path) -> Result<Vec<u8>, String> {
    let meta =
        std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(format!(
                "{} is readable by its group or others (mode {mode:03o}): run chmod 600 on it",
                path.display()
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = meta;
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(trim(&bytes).to_vec())
}

/// The bytes without leading and trailing ASCII white space (a file's final newline).
fn trim(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |i| i + 1);
    &bytes[start..end]
}

/// Reads a node secret (see [`read_private`]), the keys of
/// [`node_keys`](crate::node_keys) derive from: at least
/// [`MIN_SECRET_BYTES`](crate::auth::MIN_SECRET_BYTES) raw bytes.
pub fn read_secret(path: &Path) -> Result<Vec<u8>, String> {
    let bytes = read_private(path)?;
    if bytes.len() >= crate::auth::MIN_SECRET_BYTES {
        return Ok(bytes);
    }
    Err(format!(
        "{} holds fewer than {} bytes (`just secret` makes one)",
        path.display(),
        crate::auth::MIN_SECRET_BYTES
    ))
}

/// Reads a Redis password file (see [`read_private`]).
pub fn read_password(path: &Path) -> Result<String, String> {
    let bytes = read_private(path)?;
    let pw = String::from_utf8(bytes)
        .map_err(|_| format!("{}: the password is not UTF-8", path.display()))?;
    if pw.is_empty() || pw.contains(['\n', '\r']) {
        return Err(format!(
            "{}: must hold one password on one line",
            path.display()
        ));
    }
    Ok(pw)
}

/// Characters a URL's user information may hold as they are.
fn unreserved(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-._~".contains(c)
}

fn percent_encode(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if unreserved(c) {
                vec![c.to_string()]
            } else {
                let mut buf = [0u8; 4];
                c.encode_utf8(&mut buf)
                    .bytes()
                    .map(|b| format!("%{b:02X}"))
                    .collect()
            }
        })
        .collect()
}

/// A seed URL split around its user information: (`redis://`, `user:password`, the rest).
fn split(url: &str) -> Option<(&str, &str, &str)> {
    let scheme_end = url.find("://")? + 3;
    let after = &url[scheme_end..];
    let host_end = after.find('/').unwrap_or(after.len());
    let at = after[..host_end].rfind('@')?;
    Some((&url[..scheme_end], &after[..at], &after[at + 1..]))
}

/// `urls` (one or several separated by commas) with `password` given to each one's user;
/// a URL without a user logs in as `default`.
pub fn with_password(urls: &str, password: &str) -> String {
    let pw = percent_encode(password);
    urls.split(',')
        .map(|u| {
            let u = u.trim();
            match split(u) {
                Some((scheme, info, rest)) => {
                    let user = info.split(':').next().unwrap_or("");
                    format!("{scheme}{user}:{pw}@{rest}")
                }
                None => match u.find("://") {
                    Some(i) => format!("{}:{pw}@{}", &u[..i + 3], &u[i + 3..]),
                    None => u.to_string(),
                },
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `urls` fit to show: any password replaced by `***`.
pub fn redact(urls: &str) -> String {
    urls.split(',')
        .map(|u| {
            let u = u.trim();
            match split(u) {
                Some((scheme, info, rest)) if info.contains(':') => {
                    let user = info.split(':').next().unwrap_or("");
                    format!("{scheme}{user}:***@{rest}")
                }
                _ => u.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The Redis URL a program connects with: `url`, with the password from `password_file`
/// when one is given.
pub fn redis_url(url: &str, password_file: Option<&Path>) -> Result<String, String> {
    match password_file {
        Some(f) => Ok(with_password(url, &read_password(f)?)),
        None => Ok(url.to_string()),
    }
}

/// Writes a new file only its owner can read: created with mode 0600, never widened for
/// a moment. Refuses to replace an existing file.
pub fn create_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    opts.open(path)?.write_all(contents)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_goes_to_every_seed_and_is_redacted_when_shown() {
        let url = with_password(
            "redis://seckill-node@10.0.0.5:7000, redis://seckill-node@10.0.0.6:7000/0",
            "p@ss:w/rd",
        );
        assert_eq!(
            url,
            "redis://seckill-node:p%40ss%3Aw%2Frd@10.0.0.5:7000,redis://seckill-node:p%40ss%3Aw%2Frd@10.0.0.6:7000/0"
        );
        let info =
            redis::IntoConnectionInfo::into_connection_info(url.split(',').next().expect("a seed"))
                .expect("parses");
        assert_eq!(info.redis_settings().password(), Some("p@ss:w/rd"));
        assert_eq!(info.redis_settings().username(), Some("seckill-node"));
        let shown = redact(&url);
        assert!(!shown.contains("p%40ss"), "{shown}");
        assert_eq!(
            shown,
            "redis://seckill-node:***@10.0.0.5:7000,redis://seckill-node:***@10.0.0.6:7000/0"
        );
        assert_eq!(
            with_password("redis://127.0.0.1:6390", "x"),
            "redis://:x@127.0.0.1:6390"
        );
        assert_eq!(redact("redis://127.0.0.1:6390"), "redis://127.0.0.1:6390");
    }

    #[test]
    fn secret_files_open_to_others_are_refused_and_new_ones_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("secret");
        create_private(&p, b"  hunter2 \n").expect("created");
        let mode = std::fs::metadata(&p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(read_private(&p).expect("private"), b"hunter2");
        assert!(create_private(&p, b"again").is_err(), "never replaced");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        let err = read_private(&p).expect_err("group-readable");
        assert!(err.contains("chmod 600"), "{err}");
    }
}
