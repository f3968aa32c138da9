//! Command-line options several programs take, declared once: where Redis is and the
//! file holding its user's password, for the data plane's commands, the console and the
//! simulator alike.

use clap::Arg;
use std::path::PathBuf;

/// The Redis a program talks to when not told otherwise: the one `just redis` starts.
pub const DEFAULT_REDIS: &str = "redis://127.0.0.1:6390";

/// `--redis` and `--redis-password-file`. A program that reads them over a file of its
/// own (a node's configuration, a scenario) takes the default away
/// (`#[command(mut_args(redis_flag(|a| a.default_value(None))))]`), so that an absent
/// flag leaves the file's value; one whose Redis plays another part words the help its
/// own way.
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct RedisArgs {
    /// Redis holding the control plane: redis://[user@]host:port (the operators' user).
    #[arg(
        id = "redis",
        long = "redis",
        value_name = "REDIS",
        env = "SECKILL_REDIS",
        hide_env_values = true,
        default_value = DEFAULT_REDIS
    )]
    pub url: Option<String>,
    /// File holding the Redis user's password (mode 0600).
    #[arg(
        id = "redis_password_file",
        long = "redis-password-file",
        value_name = "REDIS_PASSWORD_FILE",
        env = "SECKILL_REDIS_PASSWORD_FILE"
    )]
    pub password_file: Option<PathBuf>,
}

/// A password file that could not be read, named by its flag.
#[derive(Debug, thiserror::Error)]
#[error("--redis-password-file: {0}")]
pub struct PasswordFileError(String);

impl RedisArgs {
    /// The URL to connect with, the password from the file in it: never to be shown
    /// (see [`crate::secrets::redact`]).
    pub fn url_with_password(&self) -> Result<String, PasswordFileError> {
        let url = self.url.as_deref().unwrap_or(DEFAULT_REDIS);
        crate::secrets::redis_url(url, self.password_file.as_deref()).map_err(PasswordFileError)
    }
}

/// Changes the `--redis` flag alone, for `#[command(mut_args(redis_flag(...)))]`:
/// `mut_arg` would move it after the program's other flags, in the help and the
/// completions alike.
pub fn redis_flag(mut change: impl FnMut(Arg) -> Arg) -> impl FnMut(Arg) -> Arg {
    move |a| {
        if a.get_id() == "redis" {
            change(a)
        } else {
            a
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        redis: RedisArgs,
    }

    #[derive(Parser)]
    #[command(mut_args(redis_flag(|a| a.default_value(None))))]
    struct OverAFile {
        #[command(flatten)]
        redis: RedisArgs,
    }

    #[test]
    fn the_flags_give_the_url_with_the_password_and_name_themselves_in_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("password");
        crate::secrets::create_private(&file, b"s3cret\n").expect("write");
        let file = file.to_str().expect("utf-8");
        let f = Flags::try_parse_from([
            "p",
            "--redis",
            "redis://ops@h:1",
            "--redis-password-file",
            file,
        ])
        .expect("parses");
        let url = f.redis.url_with_password().expect("a url");
        assert!(url.contains("s3cret") && url.contains("@h:1"), "{url}");
        let f =
            Flags::try_parse_from(["p", "--redis-password-file", "/nonexistent"]).expect("parses");
        let err = f
            .redis
            .url_with_password()
            .expect_err("no file")
            .to_string();
        assert!(err.starts_with("--redis-password-file: "), "{err}");
    }

    #[test]
    fn the_default_is_taken_away_where_a_file_comes_first() {
        // Only where neither flag nor variable is set does the default show.
        if std::env::var_os("SECKILL_REDIS").is_some() {
            return;
        }
        let f = Flags::try_parse_from(["p"]).expect("parses");
        assert_eq!(f.redis.url.as_deref(), Some(DEFAULT_REDIS));
        let o = OverAFile::try_parse_from(["p"]).expect("parses");
        assert_eq!(o.redis.url, None);
        assert_eq!(o.redis.url_with_password().expect("a url"), DEFAULT_REDIS);
    }
}
