//! The console's prompts: what each asks, and how what was typed becomes a [`Command`]
//! or a message that names what is wrong with it.

use std::path::PathBuf;

use crate::command::Command;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompt {
    CreateFrom,
    Limits,
    Block,
    Unblock,
    /// A new admission rate for the waiting room of `id`, which lets `now` through a
    /// second.
    AdmitRate {
        id: String,
        now: u32,
    },
}

impl Prompt {
    pub fn title(&self) -> String {
        match self {
            Prompt::CreateFrom => "New campaign from a TOML file".into(),
            Prompt::Limits => "Set limits on every node (field=value …)".into(),
            Prompt::Block => "Block (ip:ADDRESS or user:ID, then seconds)".into(),
            Prompt::Unblock => "Unblock (ip:ADDRESS or user:ID)".into(),
            Prompt::AdmitRate { id, now } => {
                format!("Admission rate of {id}: shoppers let in per second (now {now})")
            }
        }
    }
}

/// Turns what was typed at `prompt` into a command, or says what is wrong with it.
pub fn parse(prompt: &Prompt, text: &str) -> Result<Command, String> {
    let text = text.trim();
    match prompt {
        Prompt::CreateFrom => {
            if text.is_empty() {
                return Err("give the path of a campaign file".into());
            }
            Ok(Command::Create {
                file: PathBuf::from(text),
            })
        }
        Prompt::Limits => {
            let mut pairs = Vec::new();
            for part in text.split_whitespace() {
                let (k, v) = part
                    .split_once('=')
                    .ok_or_else(|| format!("'{part}': expected field=value"))?;
                pairs.push((k.to_string(), v.to_string()));
            }
            if pairs.is_empty() {
                return Err(format!(
                    "give field=value pairs; fields: {}",
                    seckill_core::limits::Limits::FIELDS.join(" ")
                ));
            }
            let mut check = seckill_core::limits::Limits::default();
            for (k, v) in &pairs {
                check.set(k, v)?;
            }
            Ok(Command::SetLimits(pairs))
        }
        Prompt::Block => {
            let mut parts = text.split_whitespace();
            let entry = parts.next().ok_or("give ip:ADDRESS or user:ID")?;
            let entry = seckill_core::blacklist::parse_entry(entry)?;
            let ttl_s = match parts.next() {
                None => 3600,
                Some(t) => t
                    .parse::<u64>()
                    .ok()
                    .filter(|t| *t > 0)
                    .ok_or_else(|| format!("'{t}': seconds must be a positive number"))?,
            };
            Ok(Command::Block { entry, ttl_s })
        }
        Prompt::Unblock => {
            let entry = seckill_core::blacklist::parse_entry(text)?;
            Ok(Command::Unblock { entry })
        }
        Prompt::AdmitRate { id, .. } => Ok(Command::SetAdmitRate {
            id: id.clone(),
            rate: admit_rate(text)?,
        }),
    }
}

/// A waiting room's admission rate, checked as the campaign file's `[queue]
/// admit_per_s` is.
fn admit_rate(text: &str) -> Result<u32, String> {
    const FIELD: &str = "queue.admit_per_s";
    let rate = text
        .parse::<u64>()
        .map_err(|_| format!("{FIELD}: '{text}' is not a whole number of shoppers per second"))?;
    // Beyond u32 is beyond the bound too: the check names it.
    let rate = u32::try_from(rate).unwrap_or(u32::MAX);
    seckill_core::campaign::valid_admit_rate(rate).map_err(|e| e.to_string())?;
    Ok(rate)
}
